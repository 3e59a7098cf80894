//! A Nebius service account's access token: the account signs a short RS256
//! JWT with its key and exchanges it (OAuth 2.0 token exchange, RFC 8693)
//! for a bearer token, which is kept until shortly before it expires.

use std::path::Path;
use std::time::{Duration, Instant};

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{RSA_PKCS1_SHA256, RsaKeyPair};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use rustls_pki_types::PrivateKeyDer;
use rustls_pki_types::pem::PemObject;
use serde::Deserialize;

use super::PROVIDER;
use crate::ProviderError;
use crate::http::{HttpClient, Verdict};
use crate::secret::Secret;

/// The environment variable naming the service account's credentials file
/// (the JSON `nebius iam auth-public-key generate` writes).
pub const CREDENTIALS_ENV: &str = "GPUPLAN_NEBIUS_CREDENTIALS";
/// How long the signed JWT is good for: it is exchanged at once.
const JWT_LIFETIME_SECS: i64 = 300;
/// A token is renewed this long before it expires (at most half its life).
const RENEW_MARGIN: Duration = Duration::from_secs(300);

/// The part of the credentials file gpuplan reads.
#[derive(Deserialize)]
struct CredentialsFile {
    #[serde(rename = "subject-credentials")]
    subject: SubjectCredentials,
}

#[derive(Deserialize)]
struct SubjectCredentials {
    alg: String,
    #[serde(rename = "private-key")]
    private_key: String,
    kid: String,
    iss: String,
    sub: String,
}

/// A service account's key, ready to sign.
pub struct Credentials {
    key: RsaKeyPair,
    /// The public key's id (`publickey-...`).
    kid: String,
    /// The service account (`serviceaccount-...`), as issuer and subject.
    iss: String,
    sub: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("kid", &self.kid)
            .field("iss", &self.iss)
            .finish_non_exhaustive()
    }
}

impl Credentials {
    /// # Errors
    /// `Io` or `Auth` naming the file and the field when it cannot be read
    /// or used. No key material is quoted.
    pub fn from_file(path: &Path) -> Result<Self, ProviderError> {
        let shown = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|e| ProviderError::Io {
            provider: PROVIDER.to_owned(),
            path: shown.clone(),
            detail: format!("cannot read the credentials file ({CREDENTIALS_ENV}): {e}"),
        })?;
        Self::parse(&bytes, &shown)
    }

    /// # Errors
    /// `Auth` naming `shown` (the file) and what is wrong in it.
    pub fn parse(bytes: &[u8], shown: &str) -> Result<Self, ProviderError> {
        let bad = |detail: String| ProviderError::Auth {
            provider: PROVIDER.to_owned(),
            url: shown.to_owned(),
            detail,
        };
        // serde_json's message names the line and column, never the value.
        let file: CredentialsFile = serde_json::from_slice(bytes)
            .map_err(|e| bad(format!("not a Nebius credentials file: {e}")))?;
        let s = file.subject;
        if s.alg != "RS256" {
            return Err(bad(format!(
                "`subject-credentials.alg` is `{}`; only RS256 keys are supported",
                s.alg
            )));
        }
        for (field, value) in [("kid", &s.kid), ("iss", &s.iss), ("sub", &s.sub)] {
            if value.trim().is_empty() {
                return Err(bad(format!("`subject-credentials.{field}` is empty")));
            }
        }
        let key = match PrivateKeyDer::from_pem_slice(s.private_key.as_bytes()) {
            Ok(PrivateKeyDer::Pkcs8(der)) => RsaKeyPair::from_pkcs8(der.secret_pkcs8_der()),
            Ok(PrivateKeyDer::Pkcs1(der)) => RsaKeyPair::from_der(der.secret_pkcs1_der()),
            Ok(_) => {
                return Err(bad(
                    "`subject-credentials.private-key` is not an RSA key".to_owned()
                ));
            }
            Err(_) => {
                return Err(bad(
                    "`subject-credentials.private-key` is not a PEM private key".to_owned(),
                ));
            }
        }
        .map_err(|e| {
            bad(format!(
                "`subject-credentials.private-key` is not a usable RSA key: {e}"
            ))
        })?;
        Ok(Self {
            key,
            kid: s.kid,
            iss: s.iss,
            sub: s.sub,
        })
    }

    /// The compact JWT `header.claims.signature` issued at `now`.
    ///
    /// # Errors
    /// `Auth` when signing fails.
    pub fn jwt(&self, now: DateTime<Utc>) -> Result<Secret, ProviderError> {
        let header = serde_json::json!({"alg": "RS256", "typ": "JWT", "kid": self.kid});
        let iat = now.timestamp();
        let claims = serde_json::json!({
            "iss": self.iss,
            "sub": self.sub,
            "iat": iat,
            "exp": iat + JWT_LIFETIME_SECS,
        });
        let signing_input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let mut signature = vec![0; self.key.public_modulus_len()];
        self.key
            .sign(
                &RSA_PKCS1_SHA256,
                &SystemRandom::new(),
                signing_input.as_bytes(),
                &mut signature,
            )
            .map_err(|_| ProviderError::Auth {
                provider: PROVIDER.to_owned(),
                url: "the credentials file".to_owned(),
                detail: "cannot sign the service account's JWT with its key".to_owned(),
            })?;
        Ok(Secret::new(format!(
            "{signing_input}.{}",
            URL_SAFE_NO_PAD.encode(signature)
        )))
    }
}

/// The error of a sync with no credentials file named.
pub fn unset() -> ProviderError {
    ProviderError::Auth {
        provider: PROVIDER.to_owned(),
        url: "the environment".to_owned(),
        detail: format!(
            "{CREDENTIALS_ENV} is not set (nor `credentials_file`); point it at a service account's credentials file"
        ),
    }
}

/// An access token and when to stop using it.
#[derive(Clone)]
pub struct Token {
    pub bearer: Secret,
    renew_at: Instant,
}

impl Token {
    pub fn fresh(&self, now: Instant) -> bool {
        now < self.renew_at
    }
}

#[derive(Deserialize)]
struct ExchangeAnswer {
    access_token: String,
    expires_in: Option<u64>,
}

/// Exchanges a JWT of `credentials` at `url` for an access token.
///
/// # Errors
/// `Auth` when the exchange is refused, naming the error the server gave;
/// `Decode` when its answer is unreadable; transport errors as the client
/// gives them after its retries.
pub async fn exchange(
    http: &HttpClient,
    url: &str,
    credentials: &Credentials,
) -> Result<Token, ProviderError> {
    let jwt = credentials.jwt(Utc::now())?;
    let form = [
        (
            "grant_type",
            "urn:ietf:params:oauth:grant-type:token-exchange",
        ),
        (
            "requested_token_type",
            "urn:ietf:params:oauth:token-type:access_token",
        ),
        ("subject_token_type", "urn:ietf:params:oauth:token-type:jwt"),
        ("subject_token", jwt.expose()),
    ];
    let body = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(form)
        .finish();
    let judge = |status: reqwest::StatusCode, bytes: &[u8]| -> Verdict {
        if matches!(status.as_u16(), 400 | 401 | 403) {
            // RFC 6749 §5.2: `error` and `error_description`, never the token.
            let doc: serde_json::Value = serde_json::from_slice(bytes).unwrap_or_default();
            let field = |k: &str| doc.get(k).and_then(serde_json::Value::as_str);
            let detail = match (field("error"), field("error_description")) {
                (Some(e), Some(d)) => format!("token exchange refused: {e}: {d}"),
                (Some(e), None) => format!("token exchange refused: {e}"),
                _ => format!("token exchange refused with HTTP {status}"),
            };
            return Verdict::Fail(ProviderError::Auth {
                provider: PROVIDER.to_owned(),
                url: url.to_owned(),
                detail: format!("{detail} (check {CREDENTIALS_ENV})"),
            });
        }
        if status.is_success() {
            Verdict::Done
        } else {
            Verdict::ByStatus
        }
    };
    let started = Instant::now();
    let bytes = http
        .send_judged(
            url,
            |c| {
                c.post(url)
                    .header(
                        reqwest::header::CONTENT_TYPE,
                        "application/x-www-form-urlencoded",
                    )
                    .body(body.clone())
            },
            &judge,
        )
        .await?;
    let answer: ExchangeAnswer =
        serde_json::from_slice(&bytes).map_err(|e| ProviderError::Decode {
            provider: PROVIDER.to_owned(),
            location: url.to_owned(),
            detail: format!("token exchange answer: {e}"),
        })?;
    if answer.access_token.trim().is_empty() {
        return Err(ProviderError::Decode {
            provider: PROVIDER.to_owned(),
            location: url.to_owned(),
            detail: "token exchange answered an empty `access_token`".to_owned(),
        });
    }
    // Without `expires_in` the token is used for this sync only.
    let life = Duration::from_secs(answer.expires_in.unwrap_or(0));
    let margin = RENEW_MARGIN.min(life / 2);
    Ok(Token {
        bearer: Secret::new(answer.access_token),
        renew_at: started + life - margin,
    })
}
