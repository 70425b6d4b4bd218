//! The module's status endpoint as the scenarios read it: an upstream's
//! JSON object, its generation and peers gauges, waited on.

use std::time::{Duration, Instant};

use super::Lab;
use crate::actors::load::Client;
use crate::memcheck::patience;
use crate::shared::UPSTREAM;
impl Lab {
    /// The module's generation gauge of `be`; `None` without the module,
    /// or when the status does not list `be` (no directive applies to it).
    pub(super) async fn generation(&self) -> Option<u64> {
        self.config.flavor.module.as_ref()?;
        let status = status_object(&self.client, "http", Some(UPSTREAM)).await;
        status.ok().and_then(|s| s["generation"].as_u64())
    }

    /// Polls the module's generation gauge of `be` until it has moved past
    /// `before` (bounded: 10 s, six times that under memcheck).
    pub(super) async fn wait_generation_past(&self, before: u64) {
        let deadline = Instant::now() + patience(Duration::from_secs(10));
        loop {
            let now = self.generation().await;
            if now.is_some_and(|g| g != before) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the generation of {UPSTREAM} never moved past {before}\n{}",
                self.nginx.error_log()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Polls the module's peers gauge of `be` until it reads `n`.
    pub async fn wait_peers(&self, n: u64) {
        wait_peers(&self.client, "http", UPSTREAM, n).await;
    }

    /// The module's JSON status object for `upstream`.
    pub async fn status(&self, upstream: &str) -> serde_json::Value {
        status_object(&self.client, "http", Some(upstream))
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    }
}

/// Polls the module's status until `protocol` upstream `name` holds `n`
/// peers (bounded: 10 s, six times that under memcheck).
pub async fn wait_peers(client: &Client, protocol: &str, name: &str, n: u64) {
    let deadline = Instant::now() + patience(Duration::from_secs(10));
    loop {
        let status = status_object(client, protocol, Some(name)).await;
        if matches!(&status, Ok(s) if s["peers"].as_u64() == Some(n)) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{protocol} upstream {name} never held {n} peers: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The module's JSON status object (from `/status?format=json`) of the
/// `protocol` upstream `name`, or of the first `protocol` upstream.
pub async fn status_object(
    client: &Client,
    protocol: &str,
    name: Option<&str>,
) -> Result<serde_json::Value, String> {
    let r = client.get("/status?format=json").await;
    if r.status() != 200 {
        return Err(format!("status endpoint: {r:?}"));
    }
    let v: serde_json::Value =
        serde_json::from_str(&r.body).map_err(|e| format!("status JSON: {e}: {}", r.body))?;
    v["upstreams"]
        .as_array()
        .and_then(|a| {
            a.iter()
                .find(|u| u["protocol"] == protocol && name.is_none_or(|n| u["upstream"] == n))
        })
        .cloned()
        .ok_or_else(|| format!("no {protocol} upstream {name:?} in {}", r.body))
}
