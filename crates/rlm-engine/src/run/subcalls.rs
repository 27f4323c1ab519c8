//! Sub-model calls of the REPL (`llm_query`, typed and batched): the reply
//! cache, budgets and trace of [`Run::call_model`], a schema followed or
//! checked with one retry, and the result recorded for the synthesis.

use super::*;

impl Run {
    /// A plain `llm_query` as agent `id` (a child of `parent`) at `depth`.
    pub(crate) async fn sub_query(
        &self,
        id: String,
        parent: &str,
        depth: u32,
        prompt: String,
        model: Option<String>,
    ) -> Result<String, SubcallError> {
        self.sub_call(id, parent, depth, prompt, model, None)
            .await
            .map(|v| match v {
                Value::String(s) => s,
                other => other.to_string(),
            })
    }

    /// `llm_query(prompt, schema=...)`: the reply as a JSON value that
    /// follows `schema`. The provider constrains the reply where it can;
    /// the reply is validated all the same, and one that does not follow
    /// the schema is asked for once more with what was wrong, then refused
    /// ([`SubcallError::Schema`]).
    pub(crate) async fn sub_query_typed(
        &self,
        id: String,
        parent: &str,
        depth: u32,
        prompt: String,
        model: Option<String>,
        schema: &Value,
    ) -> Result<Value, SubcallError> {
        self.sub_call(id, parent, depth, prompt, model, Some(schema))
            .await
    }

    /// One sub-call: a text reply, or with `schema` a validated JSON value.
    async fn sub_call(
        &self,
        id: String,
        parent: &str,
        depth: u32,
        prompt: String,
        model: Option<String>,
        schema: Option<&Value>,
    ) -> Result<Value, SubcallError> {
        let started = Instant::now();
        self.trace.emit(TraceEvent::SubcallStart {
            agent: id.clone(),
            parent: parent.into(),
            depth,
            kind: "llm_query".into(),
            prompt_preview: preview(&prompt, 300),
        });
        let result = self.sub_reply(&id, depth, &prompt, model, schema).await;
        let recorded = result.as_ref().map(|v| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        });
        let recorded = recorded.map_err(Clone::clone);
        self.finish_subcall(&id, parent, depth, &prompt, &recorded, started);
        result
    }

    /// The reply of a sub-call: its text, or with `schema` the value that
    /// follows it. What the sub-model was given and answered goes to the
    /// ledger.
    async fn sub_reply(
        &self,
        id: &str,
        depth: u32,
        prompt: &str,
        model: Option<String>,
        schema: Option<&Value>,
    ) -> Result<Value, SubcallError> {
        let site = Site {
            agent: id,
            depth,
            role: ModelRole::Sub,
            purpose: CallPurpose::SubQuery,
        };
        let opts = CallOpts {
            model,
            ..CallOpts::default()
        };
        let messages = vec![Message::user(prompt.to_string())];
        let value = match schema {
            None => self
                .call_model(
                    site.agent,
                    depth,
                    site.role,
                    &messages,
                    0,
                    opts,
                    site.purpose,
                    0,
                )
                .await
                .map(|r| Value::String(r.text))
                .map_err(TypedCallError::Call),
            Some(schema) => {
                self.call_following(site, messages, opts, "llm_query", schema)
                    .await
            }
        };
        let value = value.map_err(|e| match e {
            TypedCallError::Call(CallError::Budget(e)) => SubcallError::Budget(e),
            TypedCallError::Call(CallError::Model(m)) => SubcallError::Model(m),
            TypedCallError::Schema(m) => SubcallError::Schema(m),
        })?;
        self.saw(EvidenceKind::SubPrompt, id, prompt).await;
        let text = match &value {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        self.saw(EvidenceKind::SubAnswer, id, &text).await;
        Ok(value)
    }

    /// A call whose reply must follow `schema` (sent as `name`): the
    /// provider constrains it where it can; the reply is validated all the
    /// same, and one that does not follow is asked for once more with what
    /// was wrong.
    async fn call_following(
        &self,
        site: Site<'_>,
        mut messages: Vec<Message>,
        mut opts: CallOpts,
        name: &str,
        schema: &Value,
    ) -> Result<Value, TypedCallError> {
        opts.schema = Some(rlm_llm::ReplySchema::new(name, schema.clone()));
        let first = messages.len();
        loop {
            let reply = self
                .call_model(
                    site.agent,
                    site.depth,
                    site.role,
                    &messages,
                    0,
                    opts.clone(),
                    site.purpose,
                    0,
                )
                .await
                .map_err(TypedCallError::Call)?;
            match rlm_llm::schema::parse_reply(schema, &reply.text) {
                Ok(value) => return Ok(value),
                Err(e) if messages.len() == first => {
                    messages.push(Message::assistant(reply.text));
                    messages.push(Message::user(format!(
                        "That reply cannot be used: {e}. Reply again with only the JSON document the schema asks for."
                    )));
                }
                Err(e) => return Err(TypedCallError::Schema(e.to_string())),
            }
        }
    }

    /// The answer in the schema the question asked for, if it asked: one
    /// call (constrained where the provider can), validated, asked once more
    /// with what was wrong; each value keeps the citations of the supported
    /// claims that state it.
    pub(super) async fn typed_answer(
        &self,
        text: &str,
        claims: &[grounding::ClaimReport],
    ) -> Option<crate::TypedAnswer> {
        let schema = self.answer_schema.as_ref()?;
        let plain = citations::without_markers(text);
        let messages = vec![Message::user(crate::typed_answer::prompt(
            &self.question,
            &plain,
        ))];
        let site = Site {
            agent: ROOT_AGENT,
            depth: 0,
            role: ModelRole::Sub,
            purpose: CallPurpose::TypedAnswer,
        };
        let typed = self
            .call_following(site, messages, CallOpts::default(), "answer", schema)
            .await;
        Some(match typed {
            Ok(value) => crate::TypedAnswer {
                citations: crate::typed_answer::field_citations(&value, claims),
                value: Some(value),
                error: None,
            },
            Err(e) => crate::TypedAnswer {
                value: None,
                citations: Vec::new(),
                error: Some(e.to_string()),
            },
        })
    }

    pub(crate) fn finish_subcall(
        &self,
        id: &str,
        parent: &str,
        depth: u32,
        prompt: &str,
        r: &Result<String, SubcallError>,
        t0: Instant,
    ) {
        let (ok, text) = match r {
            Ok(t) => (true, t.clone()),
            Err(e) => (false, e.to_string()),
        };
        if ok {
            self.sub_results
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(SubResult {
                    parent: parent.into(),
                    prompt: preview(prompt, 200),
                    result: text.clone(),
                });
        }
        self.trace.emit(TraceEvent::SubcallEnd {
            agent: id.into(),
            parent: parent.into(),
            depth,
            ok,
            result: text,
            elapsed_ms: t0.elapsed().as_millis() as u64,
        });
    }
}
