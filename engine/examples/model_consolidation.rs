//! A consolidation pass decided by a language model you run: any
//! OpenAI-compatible chat endpoint (a local llama.cpp, vLLM or Ollama
//! server, or a hosted one). The engine itself holds no HTTP client; this
//! example calls `curl`, so it needs nothing beyond the engine.
//!
//! ```sh
//! RECALL_LLM_URL=http://127.0.0.1:8080/v1 RECALL_LLM_MODEL=qwen2.5-7b-instruct \
//!   cargo run --example model_consolidation -- ./recall-data acme [--apply]
//! ```
//!
//! `RECALL_LLM_KEY` is sent as a bearer token when set. Without `--apply`
//! the pass is a dry run. CI compiles this example but does not run it
//! (there is no model endpoint there); `engine/tests/engine/consolidation.rs`
//! drives the same path with a scripted model.

use std::process::Command;

use recall::{Config, Engine, LanguageModel, ModelFuture, ModelRequest};
use serde_json::{Value, json};

/// An OpenAI-compatible `/chat/completions` endpoint, called through curl.
struct ChatEndpoint {
    url: String,
    model: String,
    key: Option<String>,
}

impl ChatEndpoint {
    fn ask(&self, request: &ModelRequest) -> Result<String, String> {
        let body = json!({
            "model": self.model,
            "temperature": 0,
            "messages": [
                {"role": "system", "content": request.system},
                {"role": "user", "content": request.prompt},
            ],
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "proposals", "schema": request.schema, "strict": true},
            },
        });
        let mut curl = Command::new("curl");
        curl.args(["--silent", "--show-error", "--fail", "--max-time", "300"])
            .args(["-H", "content-type: application/json"])
            .args(["--data-binary", &body.to_string()])
            .arg(format!(
                "{}/chat/completions",
                self.url.trim_end_matches('/')
            ));
        if let Some(key) = &self.key {
            curl.args(["-H", &format!("authorization: Bearer {key}")]);
        }
        let out = curl.output().map_err(|e| format!("running curl: {e}"))?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        let reply: Value = serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())?;
        reply["choices"][0]["message"]["content"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| format!("no message in the reply: {reply}"))
    }
}

impl LanguageModel for ChatEndpoint {
    fn complete<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a> {
        // curl blocks: off the async workers.
        Box::pin(async move {
            let endpoint = ChatEndpoint {
                url: self.url.clone(),
                model: self.model.clone(),
                key: self.key.clone(),
            };
            let request = request.clone();
            tokio::task::spawn_blocking(move || endpoint.ask(&request))
                .await
                .map_err(|e| e.to_string())?
        })
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(data), Some(tenant)) = (args.first(), args.get(1)) else {
        return Err("usage: model_consolidation DATA_DIR TENANT [--apply]".into());
    };
    let endpoint = ChatEndpoint {
        url: std::env::var("RECALL_LLM_URL").map_err(|_| "set RECALL_LLM_URL")?,
        model: std::env::var("RECALL_LLM_MODEL").map_err(|_| "set RECALL_LLM_MODEL")?,
        key: std::env::var("RECALL_LLM_KEY").ok(),
    };
    let engine = Engine::open(Config::new(data)).await?;
    let pass = engine
        .consolidate(tenant.as_str())
        .model(endpoint)
        .dry_run(!args.iter().any(|a| a == "--apply"))
        .execute()
        .await?;
    println!("{}", serde_json::to_string_pretty(&pass)?);
    engine.flush().await?;
    Ok(())
}
