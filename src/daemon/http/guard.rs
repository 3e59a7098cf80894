//! What a web page in the user's browser must not be able to do to the API.
//! Any page can send requests to 127.0.0.1, so on top of the bearer token:
//! - a write (any method but GET, HEAD, OPTIONS) needs
//!   `Content-Type: application/json`, which a page cannot send cross-origin
//!   without a CORS preflight that the API never grants (415 otherwise);
//! - a write whose `Origin` is not the daemon's own origin, or that the browser
//!   marks as cross-site, gets 403;
//! - on a loopback listener every request must name a loopback host in `Host`,
//!   so a page whose name was rebound to 127.0.0.1 cannot read answers (403).

use axum::http::{HeaderMap, Method, StatusCode, header};

use crate::daemon::http::error::ApiError;

/// Checks one request; `loopback` tells whether the daemon listens on loopback.
///
/// # Errors
/// The refusal, naming the header at fault.
pub fn check(method: &Method, headers: &HeaderMap, loopback: bool) -> Result<(), ApiError> {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::trim);
    if loopback && !host.is_some_and(is_loopback_host) {
        return Err(refuse(
            StatusCode::FORBIDDEN,
            "Host",
            format!(
                "`{}` is not a loopback name; this daemon answers only to localhost, 127.0.0.1 or [::1]",
                host.unwrap_or("(none)")
            ),
        ));
    }
    if matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS) {
        return Ok(());
    }
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let media_type = content_type.split(';').next().unwrap_or("").trim();
    if !media_type.eq_ignore_ascii_case("application/json") {
        return Err(refuse(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "Content-Type",
            format!("a write must be sent as application/json, not `{content_type}`"),
        ));
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("");
        let own = host.is_some_and(|h| {
            ["http://", "https://"]
                .iter()
                .any(|scheme| origin.eq_ignore_ascii_case(&format!("{scheme}{h}")))
        });
        if !own {
            return Err(refuse(
                StatusCode::FORBIDDEN,
                "Origin",
                format!(
                    "writes from `{origin}` are refused; only the daemon's own origin may write"
                ),
            ));
        }
    }
    let site = headers
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("none");
    if !matches!(site, "same-origin" | "none") {
        return Err(refuse(
            StatusCode::FORBIDDEN,
            "Sec-Fetch-Site",
            format!("the browser marks this write `{site}`; only the daemon's own pages may write"),
        ));
    }
    Ok(())
}

fn refuse(status: StatusCode, header: &str, message: String) -> ApiError {
    ApiError {
        status,
        message: format!("{header}: {message}"),
        parameter: Some(header.to_owned()),
    }
}

/// `localhost` (or a name under `.localhost`, which browsers resolve to
/// loopback themselves), an IPv4 loopback address or `[::1]`, with or without
/// a port.
fn is_loopback_host(host: &str) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        match rest.split_once(']') {
            Some((ip, port)) if port.is_empty() || is_port(port) => ip,
            _ => return false,
        }
    } else {
        match host.rsplit_once(':') {
            Some((name, port)) if is_port(port) => name,
            Some(_) => return false,
            None => host,
        }
    };
    let name = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
    if name == "localhost" || name.ends_with(".localhost") {
        return true;
    }
    name.parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_loopback())
}

fn is_port(s: &str) -> bool {
    s.strip_prefix(':').unwrap_or(s).parse::<u16>().is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    fn status(method: Method, pairs: &[(&'static str, &str)], loopback: bool) -> u16 {
        check(&method, &headers(pairs), loopback).map_or_else(|e| e.status.as_u16(), |()| 200)
    }

    #[test]
    fn loopback_hosts_with_or_without_a_port_pass_and_others_are_refused() {
        for ok in [
            "localhost",
            "localhost:8321",
            "LOCALHOST.",
            "app.localhost:1",
            "127.0.0.1",
            "127.0.0.1:8321",
            "127.1.2.3:80",
            "[::1]",
            "[::1]:8321",
        ] {
            assert!(is_loopback_host(ok), "{ok}");
        }
        for bad in [
            "evil.example",
            "evil.example:8321",
            "localhost.evil.example",
            "10.0.0.1:8321",
            "[::2]:8321",
            "127.0.0.1:99999",
            "127.0.0.1:x",
            "[::1",
            "",
        ] {
            assert!(!is_loopback_host(bad), "{bad}");
        }
    }

    #[test]
    fn reads_need_only_a_loopback_host() {
        assert_eq!(
            status(Method::GET, &[("host", "127.0.0.1:8321")], true),
            200
        );
        assert_eq!(
            status(Method::GET, &[("host", "rebound.example:8321")], true),
            403
        );
        assert_eq!(status(Method::GET, &[], true), 403);
        // Beyond loopback the names are the operator's; the token guards it.
        assert_eq!(
            status(Method::GET, &[("host", "gpuplan.internal")], false),
            200
        );
    }

    #[test]
    fn writes_need_json_and_the_daemons_own_origin() {
        let host = ("host", "127.0.0.1:8321");
        let json = ("content-type", "application/json; charset=utf-8");
        assert_eq!(status(Method::POST, &[host, json], true), 200);
        assert_eq!(status(Method::POST, &[host], true), 415);
        assert_eq!(
            status(Method::POST, &[host, ("content-type", "text/plain")], true),
            415
        );
        assert_eq!(
            status(
                Method::POST,
                &[host, json, ("origin", "http://127.0.0.1:8321")],
                true
            ),
            200
        );
        assert_eq!(
            status(
                Method::POST,
                &[host, json, ("origin", "https://evil.example")],
                true
            ),
            403
        );
        assert_eq!(
            status(Method::POST, &[host, json, ("origin", "null")], true),
            403
        );
        assert_eq!(
            status(
                Method::POST,
                &[host, json, ("origin", "http://127.0.0.1:9999")],
                true
            ),
            403
        );
        assert_eq!(
            status(
                Method::POST,
                &[host, json, ("sec-fetch-site", "cross-site")],
                true
            ),
            403
        );
        assert_eq!(
            status(
                Method::DELETE,
                &[
                    ("host", "gpuplan.internal"),
                    ("origin", "https://evil.example"),
                    json
                ],
                false
            ),
            403
        );
    }
}
