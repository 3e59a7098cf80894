//! The HTTP client every adapter shares: timeouts, capped exponential backoff with
//! jitter, `Retry-After` honoured, and no retry of a 4xx other than 429 (those are
//! our mistake or bad credentials; repeating them only burns quota).

use std::time::Duration;

use chrono::{DateTime, Utc};
use reqwest::header::{
    ETAG, HeaderMap, IF_MODIFIED_SINCE, IF_NONE_MATCH, LAST_MODIFIED, RETRY_AFTER,
};
use reqwest::{Client, RequestBuilder, StatusCode};
use tokio::io::{AsyncSeekExt, AsyncWriteExt};

use crate::ProviderError;

/// How hard to try before giving up on one request.
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    /// Total tries, the first included.
    pub max_attempts: u32,
    pub base_delay: Duration,
    pub max_delay: Duration,
    /// Whole request, body included: a stalled body counts as a timeout.
    pub request_timeout: Duration,
    /// A `Retry-After` longer than this is not slept through here; the error goes
    /// back to the caller (the scheduler) with the wait attached.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 5,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
            request_timeout: Duration::from_secs(120),
            max_retry_after: Duration::from_secs(120),
        }
    }
}

/// Query parameters whose values are credentials and never appear in logs or errors.
const SECRET_PARAMS: &[&str] = &[
    "key",
    "api_key",
    "apikey",
    "token",
    "access_token",
    "signature",
];

#[derive(Debug, Clone)]
pub struct HttpClient {
    client: Client,
    provider: String,
    policy: RetryPolicy,
    /// How URLs are shown in errors and logs, and what of them is blanked from
    /// an error body that echoes the request.
    redaction: Redaction,
}

enum Attempt {
    Retry(ProviderError),
    Fail(ProviderError),
}

/// What an adapter makes of a whole answer, for APIs that report errors in
/// the body under any status (Alibaba's throttling comes as HTTP 403,
/// Tencent's errors as HTTP 200): the status alone cannot say.
#[derive(Debug)]
pub enum Verdict {
    /// The body is the answer.
    Done,
    /// Worth trying again after the shared backoff.
    Retry(ProviderError),
    Fail(ProviderError),
    /// The body says nothing the adapter knows: the status decides, by the
    /// same rules as [`HttpClient::send`] (`Retry-After` honoured, 401/403
    /// an auth error, 5xx retried).
    ByStatus,
}

/// Judges `(status, body)` of one answer.
pub type Judge<'a> = &'a (dyn Fn(StatusCode, &[u8]) -> Verdict + Sync);

/// What a conditional GET ([`HttpClient::get_if_changed`]) found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Conditional {
    /// The server says the resource is the one `validator` names (304).
    NotModified,
    /// A new body, with the validator to send next time when the server gave one.
    Changed {
        body: Vec<u8>,
        validator: Option<String>,
    },
}

impl HttpClient {
    /// # Errors
    /// `Transport` when the TLS stack cannot be set up.
    pub fn new(provider: &str, policy: RetryPolicy) -> Result<Self, ProviderError> {
        let client = Client::builder()
            .user_agent(concat!("gpuplan/", env!("CARGO_PKG_VERSION")))
            .timeout(policy.request_timeout)
            .connect_timeout(Duration::from_secs(10).min(policy.request_timeout))
            .build()
            .map_err(|e| ProviderError::Transport {
                provider: provider.to_owned(),
                url: String::new(),
                detail: error_chain(&e),
            })?;
        Ok(Self {
            client,
            provider: provider.to_owned(),
            policy,
            redaction: Redaction::Credentials,
        })
    }

    /// The same client redacting URLs the `redaction` way.
    #[must_use]
    pub fn with_redaction(mut self, redaction: Redaction) -> Self {
        self.redaction = redaction;
        self
    }

    /// GETs `url` and returns the whole body.
    ///
    /// # Errors
    /// See [`HttpClient::send`].
    pub async fn get(&self, url: &str) -> Result<Vec<u8>, ProviderError> {
        self.send(url, |c| c.get(url)).await
    }

    /// GETs `url` unless it is still what `validator` (from an earlier
    /// [`Conditional::Changed`]) names: the validator becomes `If-None-Match`
    /// (an `ETag`) or `If-Modified-Since` (a `Last-Modified` date).
    ///
    /// # Errors
    /// As [`HttpClient::send`].
    pub async fn get_if_changed(
        &self,
        url: &str,
        validator: Option<&str>,
    ) -> Result<Conditional, ProviderError> {
        let mut body = Vec::new();
        let (status, headers) = self
            .run(
                url,
                &|c: &Client| {
                    let req = c.get(url);
                    match validator.and_then(|v| v.split_once(':')) {
                        Some(("etag", tag)) => req.header(IF_NONE_MATCH, tag),
                        Some(("last-modified", date)) => req.header(IF_MODIFIED_SINCE, date),
                        _ => req,
                    }
                },
                &mut Sink::Memory(&mut body),
                None,
            )
            .await?;
        if status == StatusCode::NOT_MODIFIED && validator.is_some() {
            return Ok(Conditional::NotModified);
        }
        let header = |name| {
            headers
                .get(name)
                .and_then(|v: &reqwest::header::HeaderValue| v.to_str().ok())
        };
        let validator = header(ETAG)
            .map(|tag| format!("etag:{tag}"))
            .or_else(|| header(LAST_MODIFIED).map(|date| format!("last-modified:{date}")));
        Ok(Conditional::Changed { body, validator })
    }

    /// Sends the request `build` makes (once per attempt) and returns the body of
    /// the first successful answer. `url` is only used to name the request in
    /// errors and logs, with credentials in its query string redacted.
    ///
    /// # Errors
    /// `Auth` on 401/403, `Http` on other 4xx and on 5xx after the last attempt,
    /// `RateLimited` on 429 after the last attempt or when the server asks for a
    /// longer wait than the policy allows, `Transport` on timeouts and broken bodies.
    pub async fn send(
        &self,
        url: &str,
        build: impl Fn(&Client) -> RequestBuilder + Sync,
    ) -> Result<Vec<u8>, ProviderError> {
        let mut body = Vec::new();
        self.run(url, &build, &mut Sink::Memory(&mut body), None)
            .await?;
        Ok(body)
    }

    /// [`HttpClient::send`] for an API whose errors are in the body: every
    /// answer that arrives whole goes to `judge`, which decides whether it is
    /// the answer, worth a retry (with the same backoff as any other), or a
    /// failure. Timeouts and broken bodies are retried as in `send`.
    ///
    /// # Errors
    /// What `judge` fails with, its last retryable error after the last
    /// attempt, or `Transport`.
    pub async fn send_judged(
        &self,
        url: &str,
        build: impl Fn(&Client) -> RequestBuilder + Sync,
        judge: Judge<'_>,
    ) -> Result<Vec<u8>, ProviderError> {
        let mut body = Vec::new();
        self.run(url, &build, &mut Sink::Memory(&mut body), Some(judge))
            .await?;
        Ok(body)
    }

    /// GETs `url` into `file` chunk by chunk, so a body of any size never sits in
    /// memory whole; a retry starts the file over. Returns the bytes written.
    ///
    /// # Errors
    /// As [`HttpClient::send`], and `Io` when the file cannot be written.
    pub async fn download(
        &self,
        url: &str,
        file: &mut tokio::fs::File,
    ) -> Result<u64, ProviderError> {
        let mut written = 0;
        self.run(
            url,
            &|c: &Client| c.get(url),
            &mut Sink::File(file, &mut written),
            None,
        )
        .await?;
        // tokio's File finishes writes in the background; wait for the last one
        // before anyone reads the file through another handle.
        file.flush()
            .await
            .map_err(|e| self.io_error(&self.redaction.show(url), &e))?;
        Ok(written)
    }

    async fn run(
        &self,
        url: &str,
        build: &(dyn Fn(&Client) -> RequestBuilder + Sync),
        sink: &mut Sink<'_>,
        judge: Option<Judge<'_>>,
    ) -> Result<(StatusCode, HeaderMap), ProviderError> {
        let shown = self.redaction.show(url);
        let mut attempt = 1;
        loop {
            let err = match self
                .try_once(url, &shown, build(&self.client), sink, judge)
                .await
            {
                Ok(answer) => return Ok(answer),
                Err(Attempt::Fail(err)) => return Err(err),
                Err(Attempt::Retry(err)) => err,
            };
            if attempt >= self.policy.max_attempts {
                return Err(err);
            }
            let delay = match err.retry_after() {
                Some(wait) if wait > self.policy.max_retry_after => return Err(err),
                Some(wait) => wait,
                None => backoff_delay(&self.policy, attempt, fastrand::f64()),
            };
            tracing::warn!(
                provider = %self.provider,
                attempt,
                delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                error = %err,
                "Request failed; retrying."
            );
            tokio::time::sleep(delay).await;
            attempt += 1;
        }
    }

    async fn try_once(
        &self,
        url: &str,
        shown: &str,
        request: RequestBuilder,
        sink: &mut Sink<'_>,
        judge: Option<Judge<'_>>,
    ) -> Result<(StatusCode, HeaderMap), Attempt> {
        let transport = |detail: String| ProviderError::Transport {
            provider: self.provider.clone(),
            url: shown.to_owned(),
            detail,
        };
        let response = request
            .send()
            .await
            .map_err(|e| Attempt::Retry(transport(error_chain(&e.without_url()))))?;
        let mut response = response;
        let status = response.status();
        if status == StatusCode::NOT_MODIFIED {
            return Ok((status, response.headers().clone()));
        }
        let headers = response.headers().clone();
        // A judged error body is read whole first; the status rules below
        // then take it from here instead of from the response.
        let mut judged_body = None;
        if status.is_success() || judge.is_some() {
            sink.reset()
                .await
                .map_err(|e| Attempt::Fail(self.io_error(shown, &e)))?;
            loop {
                match response.chunk().await {
                    Ok(Some(chunk)) => {
                        crate::progress::read(chunk.len());
                        sink.write(&chunk)
                            .await
                            .map_err(|e| Attempt::Fail(self.io_error(shown, &e)))?;
                    }
                    Ok(None) => break,
                    Err(e) => {
                        return Err(Attempt::Retry(transport(format!(
                            "reading the body: {}",
                            error_chain(&e.without_url())
                        ))));
                    }
                }
            }
            if status.is_success() {
                crate::progress::answered();
            }
            match judge.map_or(Verdict::ByStatus, |judge| judge(status, sink.bytes())) {
                Verdict::Done => return Ok((status, headers)),
                Verdict::ByStatus if status.is_success() => return Ok((status, headers)),
                Verdict::Retry(err) => return Err(Attempt::Retry(err)),
                Verdict::Fail(err) => return Err(Attempt::Fail(err)),
                Verdict::ByStatus => {
                    judged_body = Some(String::from_utf8_lossy(sink.bytes()).into_owned());
                }
            }
        }
        if status == StatusCode::TOO_MANY_REQUESTS {
            let retry_after = retry_after(&headers, Utc::now());
            return Err(Attempt::Retry(ProviderError::RateLimited {
                provider: self.provider.clone(),
                url: shown.to_owned(),
                retry_after,
            }));
        }
        // A server may echo the request, credentials included, in its error.
        let text = match judged_body {
            Some(text) => text,
            None => response.text().await.unwrap_or_default(),
        };
        let body = self.redaction.blank(&text, url);
        let body: String = body.chars().take(300).collect();
        if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
            return Err(Attempt::Fail(ProviderError::Auth {
                provider: self.provider.clone(),
                url: shown.to_owned(),
                detail: format!("HTTP {}: {body}", status.as_u16()),
            }));
        }
        let err = ProviderError::Http {
            provider: self.provider.clone(),
            url: shown.to_owned(),
            status: status.as_u16(),
            body,
        };
        if status.is_server_error() {
            Err(Attempt::Retry(err))
        } else {
            Err(Attempt::Fail(err))
        }
    }
}

impl HttpClient {
    fn io_error(&self, shown: &str, e: &std::io::Error) -> ProviderError {
        ProviderError::Io {
            provider: self.provider.clone(),
            path: shown.to_owned(),
            detail: format!("writing the download: {e}"),
        }
    }
}

/// Where a response body goes: memory, or a file counting what it wrote.
enum Sink<'a> {
    Memory(&'a mut Vec<u8>),
    File(&'a mut tokio::fs::File, &'a mut u64),
}

impl Sink<'_> {
    /// What a memory sink holds (a file sink is never judged).
    fn bytes(&self) -> &[u8] {
        match self {
            Self::Memory(v) => v,
            Self::File(..) => &[],
        }
    }

    /// Empties the sink before a (re)try writes the body again.
    async fn reset(&mut self) -> std::io::Result<()> {
        match self {
            Self::Memory(v) => {
                v.clear();
                Ok(())
            }
            Self::File(f, n) => {
                **n = 0;
                f.set_len(0).await?;
                f.seek(std::io::SeekFrom::Start(0)).await.map(|_| ())
            }
        }
    }

    async fn write(&mut self, chunk: &[u8]) -> std::io::Result<()> {
        match self {
            Self::Memory(v) => {
                v.extend_from_slice(chunk);
                Ok(())
            }
            Self::File(f, n) => {
                **n += chunk.len() as u64;
                f.write_all(chunk).await
            }
        }
    }
}

/// Delay before retry number `attempt` (1-based): exponential from `base_delay`,
/// capped at `max_delay`, with "equal jitter" (half fixed, half random) so that
/// many clients that failed together do not retry together. `random` is in [0, 1).
#[must_use]
pub fn backoff_delay(policy: &RetryPolicy, attempt: u32, random: f64) -> Duration {
    let exp = policy
        .base_delay
        .saturating_mul(2u32.saturating_pow(attempt.saturating_sub(1)));
    let capped = exp.min(policy.max_delay);
    capped / 2 + capped.mul_f64(random.clamp(0.0, 1.0) / 2.0)
}

/// Reads `Retry-After` as delay-seconds or an HTTP date (RFC 9110 §10.2.3).
#[must_use]
pub fn retry_after(headers: &HeaderMap, now: DateTime<Utc>) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = DateTime::parse_from_rfc2822(value).ok()?;
    Some(
        (at.with_timezone(&Utc) - now)
            .to_std()
            .unwrap_or(Duration::ZERO),
    )
}

/// The URL with credential-bearing query values replaced, for logs and errors.
#[must_use]
pub fn redact_url(url: &str) -> String {
    let Some((base, query)) = url.split_once('?') else {
        return url.to_owned();
    };
    let parts: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((k, _)) if SECRET_PARAMS.iter().any(|s| s.eq_ignore_ascii_case(k)) => {
                format!("{k}=REDACTED")
            }
            _ => pair.to_owned(),
        })
        .collect();
    format!("{base}?{}", parts.join("&"))
}

/// How a client keeps the credentials in its URLs out of errors and logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Redaction {
    /// Provider calls: credential query parameters (`key=`, `token=`, ...)
    /// are masked.
    Credentials,
    /// Alert receivers (Slack and webhook URLs), whose path and query are the
    /// credential: only the scheme, host and port are shown.
    Origin,
}

/// Parts of a receiver's URL path shorter than this (`/hook`) are names, not
/// credentials, and blanking them would garble ordinary words of an error.
const MIN_BLANKED: usize = 6;

impl Redaction {
    /// `url` as errors and logs may show it.
    #[must_use]
    pub fn show(self, url: &str) -> String {
        match self {
            Self::Credentials => redact_url(url),
            Self::Origin => url_origin(url),
        }
    }

    /// `text` (a server's error body, say) with every secret part of `url`
    /// blanked, raw and percent-decoded, the longest first.
    #[must_use]
    pub fn blank(self, text: &str, url: &str) -> String {
        let mut secrets = self.secrets(url);
        secrets.retain(|v| !v.is_empty());
        secrets.sort_by_key(|v| std::cmp::Reverse(v.len()));
        secrets.iter().fold(text.to_owned(), |out, v| {
            out.replace(v.as_str(), "REDACTED")
        })
    }

    fn secrets(self, url: &str) -> Vec<String> {
        let is_secret = |k: &str| SECRET_PARAMS.iter().any(|s| s.eq_ignore_ascii_case(k));
        match self {
            Self::Credentials => {
                let raw = url
                    .split_once('?')
                    .map_or("", |(_, q)| q)
                    .split('&')
                    .filter_map(|pair| pair.split_once('='))
                    .filter(|(k, _)| is_secret(k))
                    .map(|(_, v)| v.to_owned());
                let decoded: Vec<String> = reqwest::Url::parse(url)
                    .map(|u| {
                        u.query_pairs()
                            .filter(|(k, _)| is_secret(k))
                            .map(|(_, v)| v.into_owned())
                            .collect()
                    })
                    .unwrap_or_default();
                raw.chain(decoded).collect()
            }
            Self::Origin => {
                let rest = url.split_once("://").map_or(url, |(_, r)| r);
                let path = rest.find(['/', '?']).map_or("", |i| &rest[i..]);
                std::iter::once(path)
                    .chain(path.split(['/', '?', '&', '=', '#']))
                    .filter(|p| p.len() >= MIN_BLANKED)
                    .map(str::to_owned)
                    .collect()
            }
        }
    }
}

/// Only the scheme, host and port of `url`: for alert receivers (Slack and
/// webhook URLs), whose path and query are the credential.
fn url_origin(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    // A `user:password@` part is a credential too.
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if scheme.is_empty() {
        format!("{host}/…")
    } else {
        format!("{scheme}://{host}/…")
    }
}

/// An error and its causes on one line; reqwest's own Display hides the cause.
fn error_chain(err: &dyn std::error::Error) -> String {
    let mut out = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        out.push_str(": ");
        out.push_str(&cause.to_string());
        source = cause.source();
    }
    out
}

#[cfg(test)]
mod tests;
