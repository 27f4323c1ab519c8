//! The parent API against real worker processes.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::Ordering;

use common::{TestHost, config, interpreter_with};
use rlm_sandbox::*;
use serde_json::json;

#[tokio::test]
async fn state_persists_and_failing_cell_keeps_earlier_state() {
    let (mut s, h) = interpreter_with("hello world").await;
    let r = s
        .run_cell("x = len(context)\nprint('n =', x)", &h)
        .await
        .unwrap();
    assert_eq!(r.stdout, "n = 11\n");
    assert!(r.error.is_none());
    let r = s
        .run_cell("y = 1\nraise ValueError('bad')", &h)
        .await
        .unwrap();
    let e = r.error.unwrap();
    assert_eq!(e.exc_type, "ValueError");
    assert_eq!(e.message, "bad");
    assert_eq!(e.line, Some(2));
    let r = s.run_cell("x + y", &h).await.unwrap();
    assert_eq!(r.value.as_deref(), Some("12"));
}

#[tokio::test]
async fn last_expression_value_is_repr_and_none_is_omitted() {
    let (mut s, h) = interpreter_with("").await;
    let r = s.run_cell("'a' + 'b'", &h).await.unwrap();
    assert_eq!(r.value.as_deref(), Some("'ab'"));
    let r = s.run_cell("None", &h).await.unwrap();
    assert_eq!(r.value, None);
}

#[tokio::test]
async fn sync_host_calls_pass_args_and_errors() {
    let (mut s, h) = interpreter_with("").await;
    let r = s
        .run_cell("print(echo({'k': [1, 2.5, 'x', None]}))", &h)
        .await
        .unwrap();
    assert_eq!(r.stdout, "{'k': [1, 2.5, 'x', None]}\n");
    assert_eq!(r.host_calls, 1);
    let r = s
        .run_cell(
            "try:\n    boom()\nexcept ValueError as e:\n    print('caught', e)",
            &h,
        )
        .await
        .unwrap();
    assert_eq!(r.stdout, "caught boom from the host\n");
}

#[tokio::test]
async fn gather_over_async_host_function_runs_concurrently() {
    let (mut s, h) = interpreter_with("").await;
    let code =
        "import asyncio\nres = await asyncio.gather(*[aecho(i) for i in range(5)])\nprint(res)";
    let r = s.run_cell(code, &h).await.unwrap();
    assert!(r.error.is_none(), "{:?}", r.error);
    assert_eq!(
        r.stdout,
        "['answer 0', 'answer 1', 'answer 2', 'answer 3', 'answer 4']\n"
    );
    assert_eq!(r.host_calls, 5);
    // All five were in flight at once (answers arrive in reverse order).
    assert_eq!(h.max_in_flight.load(Ordering::SeqCst), 5);
    let r = s.run_cell("x = await aecho(3)\nx", &h).await.unwrap();
    assert_eq!(r.value.as_deref(), Some("'answer 3'"));
}

#[tokio::test]
async fn end_cell_stops_the_cell_uncatchably() {
    let (mut s, h) = interpreter_with("").await;
    let r = s
        .run_cell("print('before')\ntry:\n    stop('x')\nexcept BaseException:\n    print('caught')\nprint('after')", &h)
        .await
        .unwrap();
    assert_eq!(r.stdout, "before\n");
    assert_eq!(r.ended_by_host.as_deref(), Some("stopped by FINAL"));
    assert!(r.error.is_none());
}

#[tokio::test]
async fn answer_dict_convention_and_get_set_var() {
    let spec = InterpreterSpec::new().input(
        "answer",
        InputValue::Json(json!({"content": "", "ready": false})),
    );
    let mut s = Interpreter::start(&config(), &spec).await.unwrap();
    let h = Arc::new(TestHost::default());
    s.run_cell(
        "answer['content'] = 'forty-two'\nanswer['ready'] = True",
        &h,
    )
    .await
    .unwrap();
    assert_eq!(
        s.get_var("answer").await.unwrap(),
        Some(json!({"content": "forty-two", "ready": true}))
    );
    assert_eq!(s.get_var("missing").await.unwrap(), None);
    assert_eq!(s.get_var("not a name").await.unwrap(), None);
    s.set_var("seed", json!([1, 2, 3])).await.unwrap();
    let r = s.run_cell("sum(seed)", &h).await.unwrap();
    assert_eq!(r.value.as_deref(), Some("6"));
}

#[tokio::test]
async fn show_vars_lists_user_variables() {
    let (mut s, h) = interpreter_with("ctx").await;
    s.run_cell("x = 1\nnames = ['a']\ndef f():\n    return 2", &h)
        .await
        .unwrap();
    let r = s.run_cell("print(SHOW_VARS())", &h).await.unwrap();
    assert!(r.error.is_none(), "{:?}", r.error);
    assert!(r.stdout.contains("'x': 'int'"), "{}", r.stdout);
    assert!(r.stdout.contains("'names': 'list'"), "{}", r.stdout);
    assert!(r.stdout.contains("'context': 'str'"), "{}", r.stdout);
    assert!(!r.stdout.contains("echo"), "{}", r.stdout);
}

#[tokio::test]
async fn context_as_list_and_documents() {
    let docs = vec![DocumentRecord {
        index: 0,
        name: "a.txt".into(),
        id: "d1".into(),
        chars: 5,
        chunk_count: 1,
        text: "héllo".into(),
    }];
    let spec = InterpreterSpec::new()
        .input(
            "context",
            InputValue::TextList(vec!["one".into(), "two".into()]),
        )
        .input("documents", InputValue::Documents(docs));
    let mut s = Interpreter::start(&config(), &spec).await.unwrap();
    let h = Arc::new(TestHost::default());
    let r = s
        .run_cell("print(len(context), context[1])\nd = documents[0]\nprint(d['name'], d['id'], d['chars'], d['chunk_count'], d['text'][1])", &h)
        .await
        .unwrap();
    assert_eq!(r.stdout, "2 two\na.txt d1 5 1 é\n");
}

/// Texts read on demand; records which were read and can fail on one index.
#[derive(Debug)]
struct Texts {
    texts: Vec<String>,
    fail_on: Option<usize>,
    reads: std::sync::Mutex<Vec<usize>>,
}

impl TextSource for Texts {
    fn count(&self) -> usize {
        self.texts.len()
    }
    fn text(&self, index: usize) -> Result<String, rlm_sandbox::TextSourceError> {
        self.reads.lock().unwrap().push(index);
        if self.fail_on == Some(index) {
            return Err("disk on fire".into());
        }
        Ok(self.texts[index].clone())
    }
}

fn texts(list: &[&str], fail_on: Option<usize>) -> Arc<Texts> {
    Arc::new(Texts {
        texts: list.iter().map(|s| s.to_string()).collect(),
        fail_on,
        reads: Default::default(),
    })
}

fn source_docs(n: usize) -> Vec<SourceDocument> {
    (0..n)
        .map(|i| SourceDocument {
            index: i as u64,
            name: format!("doc{i}.txt"),
            id: format!("id{i}"),
            chars: 3,
            chunk_count: 1,
            text: i,
        })
        .collect()
}

#[tokio::test]
async fn source_texts_are_read_once_and_shared_by_every_input() {
    let source = texts(&["één", "two"], None);
    let spec = InterpreterSpec::new()
        .texts(source.clone())
        .input(
            "context",
            InputValue::Assembled(vec![
                Piece::Literal("[0]\n".into()),
                Piece::Text(0),
                Piece::Literal("\n[1]\n".into()),
                Piece::Text(1),
            ]),
        )
        .input("texts", InputValue::SourceTexts)
        .input("documents", InputValue::SourceDocuments(source_docs(2)));
    let mut s = Interpreter::start(&config(), &spec).await.unwrap();
    let h = Arc::new(TestHost::default());
    let r = s
        .run_cell(
            "print(repr(context))\nprint(texts)\nprint([d['text'] for d in documents], documents[1]['name'])",
            &h,
        )
        .await
        .unwrap();
    assert_eq!(
        r.stdout,
        "'[0]\\néén\\n[1]\\ntwo'\n['één', 'two']\n['één', 'two'] doc1.txt\n"
    );
    // Each text crossed the pipe once although three inputs use it.
    assert_eq!(*source.reads.lock().unwrap(), vec![0, 1]);
}

#[tokio::test]
async fn unreadable_source_text_is_a_clear_error() {
    let spec = InterpreterSpec::new()
        .texts(texts(&["a", "b"], Some(1)))
        .input("texts", InputValue::SourceTexts);
    let err = Interpreter::start(&config(), &spec).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid sandbox interpreter: text 1 of the interpreter's inputs cannot be read: disk on fire"
    );
}

#[tokio::test]
async fn source_inputs_without_or_beyond_the_source_are_refused() {
    let spec = InterpreterSpec::new().input("texts", InputValue::SourceTexts);
    let err = Interpreter::start(&config(), &spec).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("refers to source texts but the interpreter has none"),
        "{err}"
    );
    let spec = InterpreterSpec::new()
        .texts(texts(&["a"], None))
        .input("documents", InputValue::SourceDocuments(source_docs(2)));
    let err = Interpreter::start(&config(), &spec).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid sandbox interpreter: input \"documents\" refers to text 1 but the source has 1"
    );
}

#[tokio::test]
async fn unknown_names_are_name_errors() {
    let (mut s, h) = interpreter_with("").await;
    let r = s.run_cell("undefined_fn(1)", &h).await.unwrap();
    assert_eq!(r.error.unwrap().exc_type, "NameError");
    assert_eq!(h.calls.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn missing_features_come_with_a_hint() {
    let (mut s, h) = interpreter_with("").await;
    let r = s.run_cell("import textwrap", &h).await.unwrap();
    let e = r.error.unwrap();
    assert_eq!(e.exc_type, "ModuleNotFoundError");
    assert!(e.message.contains("(sandbox:"), "{}", e.message);
    let r = s.run_cell("x = [1]\ndel x", &h).await.unwrap();
    assert!(r.error.unwrap().message.contains("rebind"));
    let r = s.run_cell("'%d' % 3", &h).await.unwrap();
    assert!(r.error.unwrap().message.contains("f-string"));
}

#[tokio::test]
async fn long_output_is_captured_head_and_tail() {
    let mut c = config();
    c.max_captured_output_bytes = 4096;
    let mut s = Interpreter::start(&c, &InterpreterSpec::new())
        .await
        .unwrap();
    let h = Arc::new(TestHost::default());
    let r = s
        .run_cell("for i in range(20000):\n    print('line', i)", &h)
        .await
        .unwrap();
    assert!(r.stdout.starts_with("line 0\n"));
    assert!(r.stdout.ends_with("line 19999\n"));
    assert!(r.stdout.contains("characters cut"));
    assert!(r.stdout_chars > 150_000);
    let shown = r.render(1000);
    assert!(shown.contains("characters truncated"));
    assert!(shown.chars().count() < 1100);
}

#[tokio::test]
async fn host_call_cap_per_cell() {
    let mut c = config();
    c.max_host_calls_per_cell = 10;
    let spec = InterpreterSpec::new().function("noop", HostFunctionKind::Sync);
    let mut s = Interpreter::start(&c, &spec).await.unwrap();
    let h = Arc::new(TestHost::default());
    let r = s
        .run_cell(
            "for i in range(100):\n    try:\n        noop()\n    except Exception:\n        pass",
            &h,
        )
        .await
        .unwrap();
    let e = r.error.expect("cap reached");
    assert!(e.message.contains("host call limit"), "{}", e.message);
    assert_eq!(h.calls.load(Ordering::SeqCst), 10);
    // The next cell gets a fresh allowance.
    let r = s.run_cell("noop()", &h).await.unwrap();
    assert!(r.error.is_none());
}

#[tokio::test]
async fn pool_hands_out_warm_workers_and_refills() {
    let pool = WorkerPool::new(config(), 2).await.unwrap();
    assert_eq!(pool.idle_count(), 2);
    let h = Arc::new(TestHost::default());
    let mut a = pool
        .start_interpreter(&InterpreterSpec::new())
        .await
        .unwrap();
    let mut b = pool
        .start_interpreter(&InterpreterSpec::new())
        .await
        .unwrap();
    a.run_cell("v = 1", &h).await.unwrap();
    b.run_cell("v = 2", &h).await.unwrap();
    assert_eq!(a.get_var("v").await.unwrap(), Some(json!(1)));
    assert_eq!(b.get_var("v").await.unwrap(), Some(json!(2)));
    for _ in 0..100 {
        if pool.idle_count() == 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(pool.idle_count(), 2);
}

#[tokio::test]
async fn bad_spec_and_missing_worker_are_clear_errors() {
    let spec = InterpreterSpec::new().input("1bad", InputValue::Text(String::new()));
    let err = Interpreter::start(&config(), &spec).await.unwrap_err();
    assert!(err.to_string().contains("not a Python identifier"), "{err}");
    let mut c = config();
    c.worker = WorkerCommand::new("/nonexistent/rlm-sandbox-worker");
    let err = Interpreter::start(&c, &InterpreterSpec::new())
        .await
        .unwrap_err();
    assert!(matches!(err, SandboxError::Spawn(_)), "{err}");
}

#[tokio::test]
async fn closed_interpreter_reports_closed() {
    let (mut s, h) = interpreter_with("").await;
    s.run_cell("1", &h).await.unwrap();
    // Kill through the OS to simulate a crash: the next cell reports it.
    let r = s.run_cell("x = 1", &h).await;
    assert!(r.is_ok());
    s.close().await;
}
