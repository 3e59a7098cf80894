//! The API against hostile requests: any method, header and body a page
//! or client can send, numbers out of range, names rebound to loopback,
//! solves beyond the cap, and methods that must not become metric labels.

mod support;

use std::time::Duration;

use serde_json::Value;
use support::sheet::{config_in, ok_count};
use support::{Daemon, JSON, raw};

#[tokio::test(flavor = "multi_thread")]
async fn out_of_range_numbers_get_a_400_naming_them_instead_of_a_dropped_connection() {
    let dir = tempfile::tempdir().unwrap();
    let config = config_in(dir.path(), None, "");
    let d = Daemon::start(config).await;
    let (status, body) = d
        .get("/v1/spot-history?instance=p5.48xlarge&since=100000000000d")
        .await;
    assert_eq!(
        (status, body["parameter"].as_str()),
        (400, Some("since")),
        "{body}"
    );
    assert!(body["error"].as_str().unwrap().contains("3650"), "{body}");

    let plan = |body: Value| raw(&d, "POST", "/v1/plans", &[JSON], body.to_string());
    let (status, _, body) =
        plan(serde_json::json!({"demand": [1], "spot_window": "100000000000d"})).await;
    assert_eq!(
        (status, body["parameter"].as_str()),
        (400, Some("spot_window")),
        "{body}"
    );
    let long = vec![1; gpuplan::optimizer::MAX_HORIZON_HOURS + 1];
    let (status, _, body) = plan(serde_json::json!({"demand": long})).await;
    assert_eq!(
        (status, body["parameter"].as_str()),
        (400, Some("demand")),
        "{body}"
    );
    assert!(body["error"].as_str().unwrap().contains("8784"), "{body}");
    let (status, _, body) = plan(serde_json::json!({"demand": [1e300]})).await;
    assert_eq!(
        (status, body["parameter"].as_str()),
        (400, Some("demand[0]")),
        "{body}"
    );

    // A body past the limit is refused from its announced length, before a
    // byte of it is read (a raw request: a client still writing the body
    // would see the early answer as a broken pipe).
    let mut sock = tokio::net::TcpStream::connect(d.base.trim_start_matches("http://"))
        .await
        .unwrap();
    let head = format!(
        "POST /v1/plans HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        5 << 20
    );
    tokio::io::AsyncWriteExt::write_all(&mut sock, head.as_bytes())
        .await
        .unwrap();
    let mut answer = vec![0; 512];
    let n = tokio::time::timeout(
        Duration::from_secs(10),
        tokio::io::AsyncReadExt::read(&mut sock, &mut answer),
    )
    .await
    .expect("no answer before the body was sent")
    .unwrap();
    let answer = String::from_utf8_lossy(&answer[..n]);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    // The daemon still answers.
    assert_eq!(d.get("/healthz").await.0, 200);
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_browser_page_cannot_write_or_read_through_a_rebound_name() {
    for token in [None, Some("s3cret")] {
        let dir = tempfile::tempdir().unwrap();
        let config = config_in(dir.path(), None, "");
        let d = Daemon::start_with(config, None, token).await;
        let bearer = format!("Bearer {}", token.unwrap_or(""));
        let auth = ("authorization", bearer.as_str());
        d.runs_until(|r| ok_count(r, "file:onprem") == 1).await;
        let host = d.base.trim_start_matches("http://").to_owned();
        let own = d.base.clone();

        // A simple (no-preflight) cross-site POST: text/plain.
        let plan = serde_json::json!({"name": "evil", "demand": [8]}).to_string();
        let (status, _, body) = raw(
            &d,
            "POST",
            "/v1/plans?save=true",
            &[auth, ("content-type", "text/plain")],
            plan.clone(),
        )
        .await;
        assert_eq!(status, 415, "{body}");
        assert_eq!(body["parameter"], "Content-Type");
        let (status, _, _) = raw(&d, "GET", "/v1/plans/latest?name=evil", &[auth], "").await;
        assert_eq!(status, 404, "nothing was saved");

        // JSON from another origin, or marked cross-site by the browser.
        for (k, v) in [
            ("origin", "https://evil.example"),
            ("origin", "null"),
            ("sec-fetch-site", "cross-site"),
        ] {
            let (status, _, body) = raw(&d, "POST", "/v1/sync", &[auth, JSON, (k, v)], "").await;
            assert_eq!(status, 403, "{k}: {v}: {body}");
        }
        // A rebound name reaches the socket but gets no answer.
        for name in ["evil.example", "evil.example:8321"] {
            let (status, _, body) = raw(&d, "GET", "/v1/prices", &[auth, ("host", name)], "").await;
            assert_eq!(
                (status, body["parameter"].as_str()),
                (403, Some("Host")),
                "{name}"
            );
        }
        let runs = d.get("/v1/sync-runs").await.1.as_array().unwrap().len();

        // The daemon's own origin and loopback names work.
        let localhost = host.replace("127.0.0.1", "localhost");
        let (status, _, _) = raw(
            &d,
            "GET",
            "/v1/prices",
            &[auth, ("host", localhost.as_str())],
            "",
        )
        .await;
        assert_eq!(status, 200);
        let (status, _, body) = raw(
            &d,
            "POST",
            "/v1/sync",
            &[auth, JSON, ("origin", own.as_str())],
            "",
        )
        .await;
        assert_eq!(status, 202, "{body}");
        d.runs_until(|r| r.len() > runs).await;
        d.stop().await;
    }
}

/// A two-class problem with whole hourly counts, which takes the search over
/// reserved counts about 11 s in a release build (docs/planner.md): it
/// holds a solver slot for the fraction of a second a test needs.
fn heavy_problem() -> Value {
    serde_json::from_str(include_str!("fixtures/heavy-two-class-week.json")).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn solves_beyond_the_cap_get_503_and_queries_keep_answering() {
    let dir = tempfile::tempdir().unwrap();
    let config = config_in(dir.path(), None, "[planner]\nmax_concurrent_solves = 1");
    let d = Daemon::start(config).await;
    d.runs_until(|r| ok_count(r, "file:onprem") == 1).await;
    let heavy = {
        let req = d
            .http
            .post(format!("{}/v1/plans", d.base))
            .json(&heavy_problem());
        tokio::spawn(async move { req.send().await })
    };
    // Wait until the heavy solve holds the only slot.
    let mut running = false;
    for _ in 0..1500 {
        assert!(!heavy.is_finished(), "the heavy solve ended early");
        let (_, metrics) = d.get("/metrics").await;
        if metrics
            .as_str()
            .unwrap()
            .contains("gpuplan_solves_running 1")
        {
            running = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(running, "the heavy solve never started");
    let small = serde_json::json!({"demand": [8], "gpu": ["H100"]}).to_string();
    let (status, retry, body) = raw(&d, "POST", "/v1/plans", &[JSON], small).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(retry.as_deref(), Some("10"));
    assert!(body["error"].as_str().unwrap().contains("busy"), "{body}");
    let (_, metrics) = d.get("/metrics").await;
    assert!(
        metrics
            .as_str()
            .unwrap()
            .contains("gpuplan_solves_refused_total 1")
    );
    // The store is not held by the solve: queries answer meanwhile.
    assert!(!heavy.is_finished());
    let (status, prices) = d.get("/v1/prices?gpu=H100").await;
    assert_eq!((status, prices.as_array().map(Vec::len)), (200, Some(2)));
    heavy.abort();
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn invented_methods_do_not_become_metric_labels() {
    let dir = tempfile::tempdir().unwrap();
    let config = config_in(dir.path(), None, "");
    let d = Daemon::start(config).await;
    for method in ["FOO", "BAR", "GET"] {
        raw(&d, method, "/v1/prices", &[], "").await;
    }
    let (_, metrics) = d.get("/metrics").await;
    let text = metrics.as_str().unwrap();
    assert!(text.contains(r#"method="other""#), "{text}");
    assert!(!text.contains("FOO") && !text.contains("BAR"), "{text}");
    d.stop().await;
}
