//! The end of a run: the answer verified under the citation policy,
//! grounded and judged for entailment, rewritten in the question's language
//! when needed, the counted sets checked again, and `run_finished`.

use super::*;

impl Run {
    /// Verification under the citation policy, grounding and the
    /// entailment judge, `run_finished`, the answer.
    pub(crate) async fn finish(&self, done: Finished) -> Answer {
        let Finished {
            text,
            partial_reason,
            mut report,
            file_summaries,
        } = done;
        let mut text = self.in_question_language(text).await;
        // The citation markers the documents the run read hold, read once:
        // an answer that repeats one has copied it, not cited.
        let injected = if self.config.verify_citations {
            grounding::injected_markers(&self.ledger, self.corpus.as_ref())
        } else {
            Vec::new()
        };
        let mut verification = if !self.config.verify_citations {
            None
        } else if let Some(report) = report.as_mut() {
            Some(self.verify_claims(&mut text, report, &injected))
        } else {
            let checked = citations::verify(&text, self.corpus.as_ref());
            if self.config.citation_policy == CitationPolicy::Strict && !checked.all_valid {
                text = citations::flag_unsupported(&text, &checked);
            }
            Some(checked)
        };
        if let Some(v) = verification.as_mut() {
            grounding::mark_copied(v, &injected);
        }
        let (mut claims, mut grounded) = match &verification {
            Some(v) => {
                let (claims, grounded) =
                    grounding::ground(&text, &self.question, v, &self.ledger, self.corpus.as_ref());
                (claims, Some(grounded))
            }
            None => (Vec::new(), None),
        };
        if self.config.judge_claims
            && let Some(g) = grounded.as_mut()
        {
            g.semantic = Some(self.semantic_check(&mut claims).await);
            grounding::settle(&mut claims, g);
        }
        if self.config.semantic_check
            && let Some(g) = grounded.as_ref()
            && g.semantic.is_some()
        {
            let strict = report
                .as_ref()
                .map_or(self.config.citation_policy, |r| r.citation_policy)
                == CitationPolicy::Strict;
            grounding::flag_by_verdict(&mut text, &mut claims, strict);
            // The markers moved with their claims: offsets from the final text.
            verification = verification.map(|_| {
                let mut v = citations::verify(&text, self.corpus.as_ref());
                grounding::mark_copied(&mut v, &injected);
                v
            });
        }
        // The report of the answer as it is returned.
        if let Some(v) = &verification {
            self.emit_verification(v);
        }
        if let Some(r) = report.as_mut()
            && grounded.is_some()
        {
            self.kept_without_citation(r, &claims);
        }
        if self.config.coverage
            && let Some(g) = grounded.as_mut()
        {
            let corpus = self.corpus.clone();
            let (question, found) = (self.question.clone(), claims.clone());
            g.coverage = tokio::task::spawn_blocking(move || {
                grounding::coverage(&question, &found, &corpus)
            })
            .await
            .ok();
        }
        let data = self.typed_answer(&text, &claims).await;
        let counted = self.counted_sets(&text).await;
        let (evidence, _) = self.ledger.snapshot();
        let usage = self.budget.report();
        self.trace.emit(TraceEvent::RunFinished {
            partial: partial_reason.is_some(),
            reason: partial_reason.clone(),
            usage: usage.clone(),
        });
        Answer {
            data,
            claims,
            grounded,
            evidence,
            answer: text,
            partial: partial_reason.is_some(),
            partial_reason,
            citations: verification
                .as_ref()
                .map(|r| r.citations.clone())
                .unwrap_or_default(),
            verification,
            usage,
            trace: TraceInfo {
                id: self.id.clone(),
                events: self.trace.len(),
            },
            findings: self
                .findings
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
            file_summaries,
            flow_report: report,
            counted,
        }
    }

    /// The sets the run's code counted over (the last [`COUNTED_SETS`]), each
    /// scanned again: does the corpus still give the count the run saw, and
    /// does the answer state it.
    async fn counted_sets(&self, answer: &str) -> Vec<crate::scan::CountedSet> {
        let mut sets = self.scans.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if sets.len() > COUNTED_SETS {
            sets.drain(..sets.len() - COUNTED_SETS);
        }
        if sets.is_empty() {
            return sets;
        }
        let (corpus, answer) = (self.corpus.clone(), answer.to_string());
        tokio::task::spawn_blocking(move || {
            for set in &mut sets {
                set.recheck(&corpus, &answer);
            }
            sets.retain(|s| !s.by_engine || s.count_in_answer);
            sets
        })
        .await
        .unwrap_or_default()
    }

    /// The claim-by-claim citation policy: strict drops the claims without a
    /// verified citation of the model's from `text`; best effort keeps them
    /// (and lists, after grounding, those still without one).
    fn verify_claims(
        &self,
        text: &mut String,
        report: &mut FlowReport,
        injected: &[String],
    ) -> VerificationReport {
        let mut first = citations::verify(text, self.corpus.as_ref());
        // A copied marker is no citation under either policy.
        grounding::mark_copied(&mut first, injected);
        let (kept, unsupported) = claims::apply_policy(text, &first, report.citation_policy);
        // Best effort keeps every claim: which of them stay without a
        // verified citation is known once the engine has attached its
        // passages ([`Run::kept_without_citation`]).
        if unsupported.is_empty() || report.citation_policy == CitationPolicy::BestEffort {
            return first;
        }
        self.step(
            ROOT_AGENT,
            "citations",
            format!(
                "strict citation policy: {} claim(s) without a verified citation dropped",
                unsupported.len()
            ),
            json!({"dropped": unsupported}),
        );
        report.dropped_claims = unsupported;
        *text = kept;
        citations::verify(text, self.corpus.as_ref())
    }

    /// Best effort: the claims of the answer as grounded that no verified
    /// citation backs, neither the answer's own nor a passage the engine
    /// attached (exactly the claims grounding counts as without a passage),
    /// so the list never names a claim the counts call supported.
    fn kept_without_citation(&self, report: &mut FlowReport, claims: &[grounding::ClaimReport]) {
        if report.citation_policy != CitationPolicy::BestEffort {
            return;
        }
        let unsupported: Vec<String> = claims
            .iter()
            .filter(|c| !c.citations.iter().any(|x| x.status.is_valid()))
            .map(|c| c.text.clone())
            .collect();
        if unsupported.is_empty() {
            return;
        }
        self.step(
            ROOT_AGENT,
            "citations",
            format!(
                "best_effort citation policy: {} claim(s) without a verified citation kept",
                unsupported.len()
            ),
            json!({"unsupported": unsupported}),
        );
        report.unsupported_claims = unsupported;
    }

    /// The entailment judge: the cache's verdicts, then batched sub-model
    /// calls (fifteen claims per call) judging each claim against its
    /// passage. Its usage is measured apart (it stays in the run's budget).
    /// A refused or failed call stops it, said so; the claims it did not
    /// judge stay unverified.
    async fn semantic_check(
        &self,
        claims: &mut [grounding::ClaimReport],
    ) -> grounding::SemanticSummary {
        let before = self.budget.report();
        let model = self.config.sub_model.clone();
        let plan = grounding::Judgement::plan(claims, &self.verdicts, &model);
        let mut summary = grounding::SemanticSummary {
            cached: plan.cached,
            verbatim: plan.verbatim,
            ..Default::default()
        };
        for batch in &plan.batches {
            let (system, user) = grounding::judge_prompt(claims, batch);
            let reply = self.judge(system, user).await;
            let reply = match reply {
                Ok(r) => r,
                Err(e) => {
                    summary.stopped = Some(e.to_string());
                    break;
                }
            };
            let verdicts = grounding::parse_verdicts(&reply, batch.len());
            for (&i, verdict) in batch.iter().zip(verdicts) {
                if let Some(v) = verdict {
                    grounding::record(claims, i, v, &self.verdicts, &model);
                }
            }
        }
        grounding::tally(claims, &mut summary);
        let after = self.budget.report();
        summary.calls = after.calls - before.calls;
        summary.input_tokens = after.input_tokens - before.input_tokens;
        summary.output_tokens = after.output_tokens - before.output_tokens;
        summary.cost_usd = match (after.cost_usd, before.cost_usd) {
            (Some(a), b) => Some(a - b.unwrap_or(0.0)),
            _ => None,
        };
        summary
    }

    /// `text` in the question's language: rewritten by the model when it is
    /// in another (the rewrite kept only when its markers all come back and
    /// its language is now the question's), else as it is.
    async fn in_question_language(&self, text: String) -> String {
        let Some((prompt, markers)) = crate::translate::request(&text, &self.question) else {
            return text;
        };
        let mut rewritten = self
            .translation_call(prompt, CallOpts::default())
            .await
            .and_then(|r| crate::translate::accept(&r, &markers, &self.question));
        // A small model drops placeholders or stays in the answer's
        // language: once more, statement by statement, as a JSON list.
        if rewritten.is_none()
            && let Some((prompt, schema, statements)) =
                crate::translate::request_statements(&text, &self.question)
        {
            let opts = CallOpts {
                schema: Some(schema),
                ..CallOpts::default()
            };
            rewritten = self
                .translation_call(prompt, opts)
                .await
                .and_then(|r| crate::translate::accept_statements(&r, &statements, &self.question));
        }
        self.step(
            ROOT_AGENT,
            "translation",
            if rewritten.is_some() {
                "the answer was rewritten in the question's language".into()
            } else {
                "the answer could not be rewritten in the question's language; it is kept as written".into()
            },
            Value::Null,
        );
        rewritten.unwrap_or(text)
    }

    /// One rewrite call of the root; its reply text, if it gave one.
    async fn translation_call(&self, prompt: String, opts: CallOpts) -> Option<String> {
        self.call_model(
            ROOT_AGENT,
            0,
            ModelRole::Root,
            &[Message::user(prompt)],
            0,
            opts,
            CallPurpose::Translation,
            0,
        )
        .await
        .ok()
        .map(|r| r.text)
    }

    /// One call of the judge: its instructions and a batch of claims, with
    /// the reply schema asked for (a server that does not honour it is read
    /// tolerantly).
    async fn judge(&self, system: String, user: String) -> Result<String, CallError> {
        let messages = [Message::system(system), Message::user(user)];
        let opts = CallOpts {
            schema: Some(grounding::judge_schema()),
            ..CallOpts::default()
        };
        self.call_model(
            ROOT_AGENT,
            0,
            ModelRole::Sub,
            &messages,
            0,
            opts,
            CallPurpose::SemanticCheck,
            0,
        )
        .await
        .map(|r| r.text)
    }

    fn emit_verification(&self, report: &VerificationReport) {
        self.trace.emit(TraceEvent::Verification {
            report: serde_json::to_value(report).unwrap_or(Value::Null),
        });
    }
}
