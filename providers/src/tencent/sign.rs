//! Tencent Cloud API 3.0 signing (TC3-HMAC-SHA256): a canonical request of
//! the POST, its two signed headers and the body's hash; a key derived from
//! the secret, the date and the service; the signature in `Authorization`.

use chrono::DateTime;
use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};

pub const CONTENT_TYPE: &str = "application/json; charset=utf-8";
/// The service in the credential scope: CVM whatever host is called.
const SERVICE: &str = "cvm";

fn sha256_hex(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

fn hmac(key: &[u8], message: &str) -> Vec<u8> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(message.as_bytes());
    mac.finalize().into_bytes().to_vec()
}

/// The request as signed: method, path, empty query, the content type and
/// host headers, their names, and the hash of the exact body sent.
#[must_use]
pub fn canonical_request(host: &str, body: &str) -> String {
    format!(
        "POST\n/\n\ncontent-type:{CONTENT_TYPE}\nhost:{host}\n\ncontent-type;host\n{}",
        sha256_hex(body.as_bytes())
    )
}

/// The UTC date of a unix timestamp, `2019-02-25`.
fn date(timestamp: i64) -> String {
    DateTime::from_timestamp(timestamp, 0)
        .unwrap_or_default()
        .format("%Y-%m-%d")
        .to_string()
}

#[must_use]
pub fn string_to_sign(timestamp: i64, canonical_request: &str) -> String {
    format!(
        "TC3-HMAC-SHA256\n{timestamp}\n{}/{SERVICE}/tc3_request\n{}",
        date(timestamp),
        sha256_hex(canonical_request.as_bytes())
    )
}

/// The `Authorization` header of a POST of `body` to `host` at `timestamp`.
#[must_use]
pub fn authorization(
    secret_id: &str,
    secret_key: &str,
    host: &str,
    body: &str,
    timestamp: i64,
) -> String {
    let date = date(timestamp);
    let key = hmac(
        &hmac(&hmac(format!("TC3{secret_key}").as_bytes(), &date), SERVICE),
        "tc3_request",
    );
    let to_sign = string_to_sign(timestamp, &canonical_request(host, body));
    format!(
        "TC3-HMAC-SHA256 Credential={secret_id}/{date}/{SERVICE}/tc3_request, \
         SignedHeaders=content-type;host, Signature={}",
        hex::encode(hmac(&key, &to_sign))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The worked example of Tencent Cloud's API 3.0 documentation, "Signature
    /// v3" (CVM API reference, document 213/30654; English edition at
    /// tencentcloud.com/document/api/213/33224): DescribeInstances posted to
    /// cvm.tencentcloudapi.com at 1551113065 with the example SecretKey.
    #[test]
    fn the_documented_describe_instances_example_signs_to_the_documented_value() {
        let body = r#"{"Limit": 1, "Filters": [{"Values": ["\u672a\u547d\u540d"], "Name": "instance-name"}]}"#;
        let host = "cvm.tencentcloudapi.com";
        let canonical = canonical_request(host, body);
        assert_eq!(
            canonical,
            "POST\n/\n\ncontent-type:application/json; charset=utf-8\nhost:cvm.tencentcloudapi.com\n\n\
             content-type;host\n35e9c5b0e3ae67532d3c9f17ead6c90222632e5b1ff7f6e89887f1398934f064"
        );
        assert_eq!(
            string_to_sign(1_551_113_065, &canonical),
            "TC3-HMAC-SHA256\n1551113065\n2019-02-25/cvm/tc3_request\n\
             5ffe6a04c0664d6b969fab9a13bdab201d63ee709638e2749d62a09ca18d7031"
        );
        assert_eq!(
            authorization(
                "AKID**********************0123456789EXAMPLE",
                "Gu5t9xGARNpq86cd98joQYCN3EXAMPLE",
                host,
                body,
                1_551_113_065
            ),
            "TC3-HMAC-SHA256 Credential=AKID**********************0123456789EXAMPLE/2019-02-25/cvm/tc3_request, \
             SignedHeaders=content-type;host, \
             Signature=72e494ea809ad7a8c8f7a4507b9bddcbaa8e581f516e8da2f66e2c5a96525168"
        );
    }
}
