//! Usage: reported vs estimated tokens, cost from the price table, totals
//! per model and depth.

use std::collections::BTreeMap;

use rlm_llm::testing::{Reply, Script, ScriptedServer};
use rlm_llm::{
    ChatRequest, LlmClient, Message, ModelRole, Price, PriceTable, ProviderKind, tokens,
};

#[tokio::test]
async fn usage_is_estimated_with_the_tokenizer_when_the_provider_sends_none() {
    let server = ScriptedServer::start(
        Script::new().reply(Reply::text("The answer is forty-two.").without_usage()),
    )
    .await;
    let answer = server
        .client()
        .chat(ChatRequest::user("What is the answer to everything?"))
        .await
        .unwrap();
    assert!(answer.usage.estimated);
    let expected_in = tokens::count_messages(
        "root-model",
        &[Message::user("What is the answer to everything?")],
    );
    assert_eq!(answer.usage.input_tokens, expected_in);
    assert_eq!(
        answer.usage.output_tokens,
        tokens::count_text("root-model", "The answer is forty-two.")
    );
    assert!(answer.usage.output_tokens >= 5);
    assert_eq!(answer.usage.cached_tokens, None);
}

#[tokio::test]
async fn cost_comes_from_the_price_table_and_unknown_prices_stay_unknown() {
    let server = ScriptedServer::start(
        Script::new()
            .reply(Reply::text("a").with_usage(1_000_000, 1_000_000))
            .reply(Reply::text("b").with_cached_usage(1_000_000, 0, 500_000))
            .reply(Reply::text("c").with_usage(10, 10)),
    )
    .await;
    let mut config = server.config(ProviderKind::OpenAi);
    let mut prices = BTreeMap::new();
    prices.insert(
        "root-model".to_string(),
        Price {
            input_per_mtok: 2.0,
            output_per_mtok: 8.0,
            cached_input_per_mtok: Some(0.5),
        },
    );
    config.prices = PriceTable::with_overrides(prices);
    let client = LlmClient::from_config(config).unwrap();

    let a = client.chat(ChatRequest::user("x")).await.unwrap();
    assert_eq!(a.usage.cost_usd, Some(10.0));
    let b = client.chat(ChatRequest::user("x")).await.unwrap();
    assert_eq!(b.usage.cost_usd, Some(1.0 + 0.25));
    // `sub-model` has no price: unknown, not zero.
    let c = client
        .chat(ChatRequest::new(ModelRole::Sub, vec![Message::user("x")]))
        .await
        .unwrap();
    assert_eq!(c.usage.cost_usd, None);

    let totals = client.usage();
    assert_eq!(totals.total.calls, 3);
    assert_eq!(totals.total.known_cost_usd, 11.25);
    assert_eq!(totals.total.cost_usd(), None);
    assert_eq!(totals.by_model["root-model"].cost_usd(), Some(11.25));
    assert_eq!(totals.by_model["sub-model"].unpriced_calls, 1);
}

#[tokio::test]
async fn built_in_prices_apply_to_known_models() {
    let server =
        ScriptedServer::start(Script::new().otherwise(Reply::text("ok").with_usage(1_000_000, 0)))
            .await;
    let answer = server
        .client()
        .chat(ChatRequest::user("x").with_model("gpt-4o-mini-2024-07-18"))
        .await
        .unwrap();
    let cost = answer
        .usage
        .cost_usd
        .expect("gpt-4o-mini has a built-in price");
    assert!((cost - 0.15).abs() < 1e-9, "{cost}");
}

#[tokio::test]
async fn totals_are_kept_per_model_and_per_depth_across_clones() {
    let server =
        ScriptedServer::start(Script::new().otherwise(Reply::text("ok").with_usage(10, 2))).await;
    let client = server.client();
    let other_handle = client.clone();
    client.chat(ChatRequest::user("root")).await.unwrap();
    for depth in [1, 1, 2] {
        other_handle
            .chat(ChatRequest::new(ModelRole::Sub, vec![Message::user("sub")]).at_depth(depth))
            .await
            .unwrap();
    }
    let totals = client.usage();
    assert_eq!(totals.total.calls, 4);
    assert_eq!(totals.total.input_tokens, 40);
    assert_eq!(totals.total.output_tokens, 8);
    assert_eq!(totals.by_model["root-model"].calls, 1);
    assert_eq!(totals.by_model["sub-model"].calls, 3);
    assert_eq!(totals.by_depth[&0].calls, 1);
    assert_eq!(totals.by_depth[&1].calls, 2);
    assert_eq!(totals.by_depth[&2].total_tokens(), 12);
}

#[tokio::test]
async fn the_answering_model_decides_the_price_unless_the_requested_name_is_configured() {
    // A local server reached under the default name `gpt-4.1` is not billed
    // at OpenAI's price: it says it is a GGUF file.
    let server = ScriptedServer::start(
        Script::new()
            .reply(
                Reply::text("a")
                    .with_usage(1000, 10)
                    .with_model("/models/qwen.gguf"),
            )
            .reply(
                Reply::text("b")
                    .with_usage(1_000_000, 0)
                    .with_model("gpt-4o-2024-08-06"),
            )
            .reply(
                Reply::text("c")
                    .with_usage(1_000_000, 0)
                    .with_model("/models/qwen.gguf"),
            ),
    )
    .await;
    let mut config = server.config(ProviderKind::OpenAi);
    config.prices = PriceTable::with_overrides(BTreeMap::from([(
        "my-local".to_string(),
        Price {
            input_per_mtok: 1.0,
            output_per_mtok: 1.0,
            cached_input_per_mtok: None,
        },
    )]));
    let client = LlmClient::from_config(config).unwrap();
    let a = client
        .chat(ChatRequest::user("x").with_model("gpt-4.1"))
        .await
        .unwrap();
    assert_eq!(a.usage.cost_usd, None);
    assert_eq!(a.usage.model, "gpt-4.1");
    // An Azure-style deployment name is priced by the model behind it.
    let b = client
        .chat(ChatRequest::user("x").with_model("my-deployment"))
        .await
        .unwrap();
    assert_eq!(b.usage.cost_usd, Some(2.5));
    // A price configured for the requested name wins.
    let c = client
        .chat(ChatRequest::user("x").with_model("my-local"))
        .await
        .unwrap();
    assert_eq!(c.usage.cost_usd, Some(1.0));
}
