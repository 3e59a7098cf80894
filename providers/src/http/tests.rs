use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::http::{HeaderValue, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::*;

proptest::proptest! {
    /// A server's `Retry-After`: a wait or nothing, never a panic.
    #[test]
    fn any_retry_after_value_is_a_wait_or_ignored(value in "[ -~]{0,40}", secs in proptest::num::u64::ANY) {
        for v in [value.clone(), secs.to_string()] {
            let mut h = HeaderMap::new();
            if let Ok(v) = HeaderValue::from_str(&v) {
                h.insert(RETRY_AFTER, v);
            }
            let _ = retry_after(&h, Utc::now());
        }
    }
}

fn fast_policy() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 3,
        base_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(5),
        request_timeout: Duration::from_millis(500),
        max_retry_after: Duration::from_secs(2),
    }
}

/// Serves `/` with `respond(n)` for the n-th request (0-based) and counts hits.
async fn serve(
    respond: impl Fn(usize) -> axum::response::Response + Clone + Send + Sync + 'static,
) -> (String, Arc<AtomicUsize>) {
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    let app = Router::new().route(
        "/",
        get(move || {
            let respond = respond.clone();
            let n = counter.fetch_add(1, Ordering::SeqCst);
            async move { respond(n) }
        }),
    );
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}/"), hits)
}

fn client() -> HttpClient {
    HttpClient::new("test", fast_policy()).unwrap()
}

#[tokio::test]
async fn server_errors_are_retried_until_success() {
    let (url, hits) = serve(|n| {
        if n < 2 {
            (StatusCode::SERVICE_UNAVAILABLE, "busy").into_response()
        } else {
            "ok".into_response()
        }
    })
    .await;
    assert_eq!(client().get(&url).await.unwrap(), b"ok");
    assert_eq!(hits.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn server_errors_give_up_after_the_last_attempt() {
    let (url, hits) = serve(|_| (StatusCode::BAD_GATEWAY, "down").into_response()).await;
    let err = client().get(&url).await.unwrap_err();
    assert!(
        matches!(err, ProviderError::Http { status: 502, .. }),
        "{err}"
    );
    assert!(err.is_retryable());
    assert_eq!(hits.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn rate_limits_are_retried_after_the_requested_wait() {
    let (url, hits) = serve(|n| {
        if n == 0 {
            let mut r = (StatusCode::TOO_MANY_REQUESTS, "slow down").into_response();
            r.headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from_static("1"));
            r
        } else {
            "ok".into_response()
        }
    })
    .await;
    assert_eq!(client().get(&url).await.unwrap(), b"ok");
    assert_eq!(hits.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_judged_answer_without_an_api_error_goes_by_its_status() {
    let (url, hits) = serve(|n| match n {
        0 => {
            let mut r = (StatusCode::TOO_MANY_REQUESTS, "slow down").into_response();
            r.headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from_static("1"));
            r
        }
        1 => (StatusCode::BAD_REQUEST, "{\"Code\": \"Known\"}").into_response(),
        _ => (StatusCode::FORBIDDEN, "<html>denied</html>").into_response(),
    })
    .await;
    // The adapter knows `Known` bodies; anything else goes by status.
    let judge = |_: StatusCode, body: &[u8]| {
        if body.starts_with(b"{") {
            Verdict::Done
        } else {
            Verdict::ByStatus
        }
    };
    let http = client();
    let send = || http.send_judged(&url, |c| c.get(&url), &judge);
    assert_eq!(send().await.unwrap(), b"{\"Code\": \"Known\"}");
    assert_eq!(
        hits.load(Ordering::SeqCst),
        2,
        "the 429 waited and was retried"
    );
    let err = send().await.unwrap_err();
    assert!(matches!(err, ProviderError::Auth { .. }), "{err}");
    assert!(err.to_string().contains("denied"), "{err}");
}

#[tokio::test]
async fn a_wait_longer_than_the_policy_allows_goes_back_to_the_caller() {
    let (url, hits) = serve(|_| {
        let mut r = StatusCode::TOO_MANY_REQUESTS.into_response();
        r.headers_mut()
            .insert(RETRY_AFTER, HeaderValue::from_static("3600"));
        r
    })
    .await;
    let err = client().get(&url).await.unwrap_err();
    assert_eq!(err.retry_after(), Some(Duration::from_secs(3600)));
    assert_eq!(hits.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn client_errors_other_than_429_are_not_retried() {
    let (url, hits) = serve(|_| (StatusCode::NOT_FOUND, "no such page").into_response()).await;
    let err = client().get(&url).await.unwrap_err();
    assert!(matches!(err, ProviderError::Http { status: 404, .. }));
    assert!(err.to_string().contains("no such page"));
    assert_eq!(hits.load(Ordering::SeqCst), 1);

    let (url, hits) = serve(|_| StatusCode::FORBIDDEN.into_response()).await;
    let err = client().get(&url).await.unwrap_err();
    assert!(matches!(err, ProviderError::Auth { .. }), "{err}");
    assert!(!err.is_retryable());
    assert_eq!(hits.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_slow_server_times_out_on_every_attempt() {
    let (url, hits) = serve(|_| {
        std::thread::sleep(Duration::from_millis(700));
        "late".into_response()
    })
    .await;
    let err = client().get(&url).await.unwrap_err();
    assert!(matches!(err, ProviderError::Transport { .. }), "{err}");
    assert_eq!(hits.load(Ordering::SeqCst), 3);
}

/// A raw server whose first answer is `first` (a body cut short) and every
/// later one `then`; returns its URL.
async fn truncated_then_whole(first: &'static [u8], then: &'static [u8]) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    tokio::spawn(async move {
        for n in 0.. {
            let (mut sock, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 1024];
            let _ = sock.read(&mut buf).await;
            sock.write_all(if n == 0 { first } else { then })
                .await
                .unwrap();
            sock.shutdown().await.unwrap();
        }
    });
    url
}

#[tokio::test]
async fn a_truncated_body_is_a_transport_error_and_is_retried() {
    let url = truncated_then_whole(
        b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n{\"partial\":",
        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}",
    )
    .await;
    assert_eq!(client().get(&url).await.unwrap(), b"{}");
}

#[tokio::test]
async fn a_download_streams_to_a_file_and_a_retry_starts_it_over() {
    let url = truncated_then_whole(
        b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nPARTIAL-",
        b"HTTP/1.1 200 OK\r\ncontent-length: 8\r\nconnection: close\r\n\r\ncomplete",
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("offer.json");
    let mut file = tokio::fs::File::options()
        .create(true)
        .read(true)
        .write(true)
        .truncate(true)
        .open(&path)
        .await
        .unwrap();
    let written = client().download(&url, &mut file).await.unwrap();
    drop(file);
    assert_eq!(
        (written, std::fs::read_to_string(&path).unwrap()),
        (8, "complete".to_owned())
    );
}

#[test]
fn backoff_grows_exponentially_up_to_the_cap_with_jitter() {
    let policy = RetryPolicy {
        base_delay: Duration::from_millis(100),
        max_delay: Duration::from_secs(1),
        ..RetryPolicy::default()
    };
    assert_eq!(backoff_delay(&policy, 1, 0.0), Duration::from_millis(50));
    assert_eq!(backoff_delay(&policy, 1, 1.0), Duration::from_millis(100));
    assert_eq!(backoff_delay(&policy, 3, 0.0), Duration::from_millis(200));
    assert_eq!(backoff_delay(&policy, 30, 1.0), Duration::from_secs(1));
}

#[test]
fn retry_after_reads_seconds_and_http_dates() {
    let now = DateTime::parse_from_rfc3339("2026-11-29T12:00:00Z")
        .unwrap()
        .with_timezone(&Utc);
    let mut h = HeaderMap::new();
    h.insert(RETRY_AFTER, HeaderValue::from_static("7"));
    assert_eq!(retry_after(&h, now), Some(Duration::from_secs(7)));
    h.insert(
        RETRY_AFTER,
        HeaderValue::from_static("Sun, 29 Nov 2026 12:00:30 GMT"),
    );
    assert_eq!(retry_after(&h, now), Some(Duration::from_secs(30)));
    h.insert(RETRY_AFTER, HeaderValue::from_static("soon"));
    assert_eq!(retry_after(&h, now), None);
}

#[test]
fn credentials_in_query_strings_are_redacted() {
    assert_eq!(
        redact_url("https://x.test/skus?key=SECRET&pageToken=abc"),
        "https://x.test/skus?key=REDACTED&pageToken=abc"
    );
    assert_eq!(redact_url("https://x.test/plain"), "https://x.test/plain");
    assert_eq!(
        Redaction::Credentials.blank(
            "bad key s3c+r/t or s3c%2Br%2Ft; page abc",
            "https://x.test/skus?key=s3c%2Br%2Ft&pageToken=abc"
        ),
        "bad key REDACTED or REDACTED; page abc"
    );
    // A receiver echoing its own URL: every longer part of the path goes.
    let url = "https://hooks.slack.com/services/T0AAAA/B0BBBB/XXSECRETXX?token=QQSECRET";
    let echoed = "no route /services/T0AAAA/B0BBBB/XXSECRETXX; token QQSECRET; XXSECRETXX; hook";
    let blanked = Redaction::Origin.blank(echoed, url);
    for secret in ["XXSECRETXX", "QQSECRET", "T0AAAA", "B0BBBB"] {
        assert!(!blanked.contains(secret), "{blanked}");
    }
    assert!(
        blanked.starts_with("no route ") && blanked.ends_with("; hook"),
        "{blanked}"
    );
    assert_eq!(Redaction::Origin.show(url), "https://hooks.slack.com/…");
    assert_eq!(
        url_origin("https://hooks.slack.com/services/T0/B0/SECRET?x=SECRET#SECRET"),
        "https://hooks.slack.com/…"
    );
    assert_eq!(
        url_origin("http://user:SECRET@127.0.0.1:9/hook"),
        "http://127.0.0.1:9/…"
    );
}
