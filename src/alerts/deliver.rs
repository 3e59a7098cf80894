//! Delivery of queued alerts: one task drains the outbox, sends each message
//! to its channel, marks it delivered once the receiver accepted it (2xx), and
//! otherwise retries with capped exponential backoff. Because the outbox is in
//! the catalog, a receiver that is down gets its alerts when it comes back,
//! also across a daemon restart. A crash between the receiver's acceptance and
//! the mark would resend; every message carries a stable `Idempotency-Key` so
//! the receiver can drop such a repeat.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use gpuplan_providers::ProviderError;
use gpuplan_providers::http::{HttpClient, Redaction, RetryPolicy, backoff_delay};
use gpuplan_providers::secret::Secret;
use hmac::{Hmac, KeyInit, Mac};
use serde_json::{Value, json};
use sha2::Sha256;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::alerts::channels::{ChannelConfig, ChannelUrl, is_http_url};
use crate::store::{OutboxMessage, Pool};

/// The header carrying `sha256=<hex HMAC of the body>` when a secret is set.
pub const SIGNATURE_HEADER: &str = "X-Gpuplan-Signature";

/// A channel ready to send: its config, its URL (from the file or the
/// environment) and, for webhooks, the signing secret.
pub struct Channel {
    pub config: ChannelConfig,
    pub url: Option<Secret>,
    pub secret: Option<Secret>,
}

/// Resolves channels, reading URLs and signing secrets from the environment.
///
/// # Errors
/// Names the channel whose `url_env` or `secret_env` variable is unset, or
/// whose `url_env` does not hold an http(s) URL.
pub fn channels(
    config: &BTreeMap<String, ChannelConfig>,
) -> Result<BTreeMap<String, Channel>, String> {
    config
        .iter()
        .map(|(name, c)| {
            let from_env = |key: &str, var: &str| {
                Secret::from_env(var).ok_or_else(|| {
                    format!("alerts.channels.{name}.{key}: the environment variable {var} is not set")
                })
            };
            let url = match c {
                ChannelConfig::Webhook { url, .. } | ChannelConfig::Slack { url } => Some(match url {
                    ChannelUrl::Inline(u) => u.clone(),
                    ChannelUrl::Env(var) => {
                        let u = from_env("url_env", var)?;
                        if !is_http_url(u.expose()) {
                            return Err(format!(
                                "alerts.channels.{name}.url_env: {var} does not hold an http(s) URL"
                            ));
                        }
                        u
                    }
                }),
                ChannelConfig::Log => None,
            };
            let secret = match c {
                ChannelConfig::Webhook { secret_env: Some(var), .. } => {
                    Some(from_env("secret_env", var)?)
                }
                _ => None,
            };
            Ok((name.clone(), Channel { config: c.clone(), url, secret }))
        })
        .collect()
}

/// `sha256=` and the hex HMAC-SHA256 of `body` under `secret`.
#[must_use]
pub fn signature(secret: &Secret, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.expose().as_bytes())
        .expect("HMAC takes keys of any length");
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// Slack's readable text for an alert payload.
fn slack_text(payload: &Value) -> String {
    format!(
        ":rotating_light: *{}* ({}): {}",
        payload["rule"].as_str().unwrap_or("alert"),
        payload["kind"].as_str().unwrap_or(""),
        payload["message"].as_str().unwrap_or("")
    )
}

/// Sends one payload through one channel.
///
/// # Errors
/// The transport error or the receiver's non-2xx answer; the client shows the
/// receiver by origin only and blanks its URL from any echo.
pub async fn send(http: &HttpClient, channel: &Channel, payload: &Value) -> Result<(), String> {
    let Some(url) = &channel.url else {
        tracing::warn!(rule = %payload["rule"], key = %payload["key"], message = %payload["message"], "Alert.");
        return Ok(());
    };
    post(http, channel, url.expose(), payload)
        .await
        .map_err(|e| e.to_string())
}

async fn post(
    http: &HttpClient,
    channel: &Channel,
    url: &str,
    payload: &Value,
) -> Result<(), ProviderError> {
    match &channel.config {
        ChannelConfig::Log => Ok(()),
        ChannelConfig::Slack { .. } => {
            let body = json!({"text": slack_text(payload)}).to_string();
            http.send(url, |c| {
                c.post(url)
                    .header("content-type", "application/json")
                    .body(body.clone())
            })
            .await
            .map(|_| ())
        }
        ChannelConfig::Webhook { .. } => {
            let body = payload.to_string();
            let key = payload["idempotency_key"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let signed = channel
                .secret
                .as_ref()
                .map(|s| signature(s, body.as_bytes()));
            http.send(url, |c| {
                let mut req = c
                    .post(url)
                    .header("content-type", "application/json")
                    .header("Idempotency-Key", key.clone())
                    .body(body.clone());
                if let Some(sig) = &signed {
                    req = req.header(SIGNATURE_HEADER, sig.clone());
                }
                req
            })
            .await
            .map(|_| ())
        }
    }
}

/// The client alerts are sent with: one try per send, because the outbox is
/// the retry loop (and its state survives restarts); receivers are shown by
/// origin only.
///
/// # Errors
/// When the TLS stack cannot be set up.
pub fn client(timeout: Duration) -> Result<HttpClient, ProviderError> {
    Ok(HttpClient::new(
        "alerts",
        RetryPolicy {
            max_attempts: 1,
            request_timeout: timeout,
            ..RetryPolicy::default()
        },
    )?
    .with_redaction(Redaction::Origin))
}

/// What the delivery task needs.
pub struct Delivery {
    pub pool: Arc<Pool>,
    pub channels: BTreeMap<String, Channel>,
    pub retry_initial: Duration,
    pub retry_max: Duration,
    pub timeout: Duration,
    /// Notified when an evaluation queued messages.
    pub wake: Arc<Notify>,
    pub cancel: CancellationToken,
}

async fn blocking<T: Send + 'static>(
    pool: &Arc<Pool>,
    f: impl FnOnce(&Pool) -> T + Send + 'static,
) -> Option<T> {
    let pool = pool.clone();
    tokio::task::spawn_blocking(move || f(&pool)).await.ok()
}

/// How many due messages one claim takes.
const CLAIM_BATCH: u32 = 10;

/// Drains the outbox until cancelled.
pub async fn run(d: Delivery) {
    let Ok(http) = client(d.timeout) else {
        tracing::error!("Could not build the HTTP client for alert delivery.");
        return;
    };
    let policy = RetryPolicy {
        base_delay: d.retry_initial,
        max_delay: d.retry_max,
        ..RetryPolicy::default()
    };
    loop {
        // Held long enough to send the whole batch; a replica that dies
        // meanwhile leaves the rest to be claimed again after that.
        let hold = chrono::Duration::from_std(d.timeout * (CLAIM_BATCH + 1)).unwrap_or_default();
        let due = blocking(&d.pool, move |p| {
            p.write(|s| {
                let now = Utc::now();
                s.claim_due_messages(now, now + hold, CLAIM_BATCH)
            })
        })
        .await
        .and_then(Result::ok)
        .unwrap_or_default();
        let mut due = due.into_iter();
        while let Some(message) = due.next() {
            if d.cancel.is_cancelled() {
                // The rest of the claim is due again now, for the next
                // daemon or replica, instead of after the hold.
                let ids: Vec<i64> = std::iter::once(message.id)
                    .chain(due.map(|m| m.id))
                    .collect();
                let released = blocking(&d.pool, move |p| {
                    p.write(|s| s.release_messages(&ids, Utc::now()))
                })
                .await;
                if !matches!(released, Some(Ok(()))) {
                    tracing::error!("Could not release the undelivered alerts of this claim.");
                }
                return;
            }
            deliver_one(&d, &http, &policy, message).await;
        }
        let next = blocking(&d.pool, |p| p.read(|s| s.next_message_due()))
            .await
            .and_then(Result::ok)
            .flatten();
        let wait = next.map_or(Duration::from_secs(60), |at| {
            (at - Utc::now())
                .to_std()
                .unwrap_or(Duration::ZERO)
                .min(Duration::from_secs(60))
        });
        tokio::select! {
            () = d.cancel.cancelled() => return,
            () = d.wake.notified() => {}
            () = tokio::time::sleep(wait) => {}
        }
    }
}

#[tracing::instrument(skip_all, fields(rule = %message.rule, channel = %message.channel, id = message.id))]
async fn deliver_one(
    d: &Delivery,
    http: &HttpClient,
    policy: &RetryPolicy,
    message: OutboxMessage,
) {
    let result = match d.channels.get(&message.channel) {
        Some(channel) => send(http, channel, &message.payload).await,
        None => Err(format!(
            "channel `{}` is no longer configured",
            message.channel
        )),
    };
    let id = message.id;
    let recorded = match result {
        Ok(()) => {
            tracing::info!("Alert delivered.");
            blocking(&d.pool, move |p| {
                p.write(|s| s.mark_delivered(id, Utc::now()))
            })
            .await
        }
        Err(error) => {
            let attempt = u32::try_from(message.attempts + 1).unwrap_or(u32::MAX);
            let delay = backoff_delay(policy, attempt, fastrand::f64());
            let next = Utc::now() + chrono::Duration::from_std(delay).unwrap_or_default();
            tracing::warn!(attempt, error = %error, retry_at = %next, "Alert delivery failed; will retry.");
            blocking(&d.pool, move |p| {
                p.write(|s| s.mark_attempt_failed(id, next, &error))
            })
            .await
        }
    };
    if !matches!(recorded, Some(Ok(()))) {
        tracing::error!("Could not record the delivery outcome.");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_channel_url_from_an_unset_or_non_url_variable_is_refused_by_name() {
        let config = |var: &str| {
            BTreeMap::from([(
                "chat".to_owned(),
                ChannelConfig::Slack {
                    url: ChannelUrl::Env(var.to_owned()),
                },
            )])
        };
        let unset = channels(&config("GPUPLAN_TEST_SURELY_UNSET_URL"))
            .err()
            .unwrap();
        assert!(
            unset.contains("alerts.channels.chat.url_env")
                && unset.contains("GPUPLAN_TEST_SURELY_UNSET_URL is not set"),
            "{unset}"
        );
        // PATH is set on every machine and is no URL; its value is not echoed.
        let not_url = channels(&config("PATH")).err().unwrap();
        assert!(
            not_url.contains("PATH does not hold an http(s) URL"),
            "{not_url}"
        );
        assert!(!not_url.contains("/usr"), "{not_url}");
    }

    #[test]
    fn signatures_are_hex_hmac_sha256_of_the_body() {
        // RFC 4231 test case 2.
        let sig = signature(&Secret::new("Jefe"), b"what do ya want for nothing?");
        assert_eq!(
            sig,
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
