//! Who may look and who may act. Each request is authenticated before any page is read:
//! by HTTP Basic (a user's name and token) or a bearer token, against the users configured;
//! without credentials only when an anonymous role is configured. Tokens are kept as their
//! SHA-256 digests and compared digest to digest, so a configuration dump or a timing probe
//! gives no token away. Actions (POST) also carry a token derived from the user and a key
//! drawn at start, so that a page of another site cannot submit them with the browser's
//! remembered credentials (CSRF).

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

use crate::ConsoleConfig;

/// The name of a request without credentials, where [`ConsoleConfig::anonymous`](crate::ConsoleConfig::anonymous)
/// lets it in; no user may take it.
const ANONYMOUS: &str = "anonymous";

/// What a user may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Role {
    /// Every view; no action.
    ReadOnly,
    /// Every view and every action: retry and discard dead letters, replay rows, release
    /// parked aggregates.
    Operator,
}

impl Role {
    /// How pages name it.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::ReadOnly => "read-only",
            Self::Operator => "operator",
        }
    }
}

/// A token shorter than this is refused: tokens are secrets drawn at random (`openssl rand
/// -hex 16`), not passwords, which is why a plain SHA-256 digest protects them at rest.
pub const SHORTEST_TOKEN: usize = 16;

/// One user of the console.
#[derive(Clone)]
#[non_exhaustive]
pub struct ConsoleUser {
    /// The name: the Basic-auth user name, and the actor of the audit records of its actions.
    pub name: String,
    /// What it may do.
    pub role: Role,
    /// Whether it may see payloads, when [`ConsoleConfig::show_payloads`](crate::ConsoleConfig::show_payloads)
    /// lets anyone. Payloads may hold personal data.
    pub payloads: bool,
    digest: [u8; 32],
}

impl std::fmt::Debug for ConsoleUser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsoleUser")
            .field("name", &self.name)
            .field("role", &self.role)
            .field("payloads", &self.payloads)
            .finish_non_exhaustive()
    }
}

/// Why a user cannot be configured.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AccessError {
    /// The token is shorter than [`SHORTEST_TOKEN`].
    #[error("the token of console user {0:?} is shorter than {SHORTEST_TOKEN} characters")]
    ShortToken(String),
    /// A digest is not 64 hex digits.
    #[error("the token_sha256 of console user {0:?} is not 64 hex digits")]
    BadDigest(String),
    /// A name is empty, holds `:` (Basic auth splits on it) or a control character, or is
    /// `anonymous` (the audit trail's name for requests without credentials).
    #[error(
        "console user name {0:?} is empty, holds ':' or a control character, or is `anonymous`"
    )]
    BadName(String),
}

impl ConsoleUser {
    /// A user who signs in with `token`.
    ///
    /// # Errors
    /// A bad name, or a token shorter than [`SHORTEST_TOKEN`].
    pub fn with_token(name: &str, role: Role, token: &str) -> Result<Self, AccessError> {
        if token.chars().count() < SHORTEST_TOKEN {
            return Err(AccessError::ShortToken(name.to_owned()));
        }
        Self::with_digest(name, role, &hex::encode(digest(token)))
    }

    /// A user whose token has this SHA-256 digest (hex): a configuration file need not hold
    /// the token itself.
    ///
    /// # Errors
    /// A bad name, or a digest that is not 64 hex digits.
    pub fn with_digest(name: &str, role: Role, sha256_hex: &str) -> Result<Self, AccessError> {
        if name.is_empty()
            || name.contains(':')
            || name.chars().any(char::is_control)
            || name == ANONYMOUS
        {
            return Err(AccessError::BadName(name.to_owned()));
        }
        let mut digest = [0u8; 32];
        hex::decode_to_slice(sha256_hex.trim(), &mut digest)
            .map_err(|_| AccessError::BadDigest(name.to_owned()))?;
        Ok(Self {
            name: name.to_owned(),
            role,
            payloads: false,
            digest,
        })
    }

    /// Whether `other` signs in with the same token: two users must not (a bearer token would
    /// sign in as whichever comes first).
    #[must_use]
    pub fn shares_token_with(&self, other: &Self) -> bool {
        subtle::ConstantTimeEq::ct_eq(&self.digest[..], &other.digest[..]).into()
    }

    /// Lets this user see payloads (see [`ConsoleUser::payloads`]).
    #[must_use]
    pub fn with_payloads(mut self, payloads: bool) -> Self {
        self.payloads = payloads;
        self
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// Who is asking: put on every request the console answers.
#[derive(Debug, Clone)]
pub(crate) struct Viewer {
    /// The user's name, or `anonymous`.
    pub(crate) name: String,
    pub(crate) role: Role,
    pub(crate) payloads: bool,
}

/// The key CSRF tokens are derived from, drawn at start: a restart invalidates open forms.
#[derive(Clone)]
pub(crate) struct CsrfKey(Hmac<Sha256>);

impl CsrfKey {
    #[allow(
        clippy::expect_used,
        reason = "no randomness from the OS is a broken machine, and a fixed key would make                   every form forgeable: a console that cannot draw its key does not start"
    )]
    pub(crate) fn random() -> Self {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).expect("the OS's random number generator");
        Self(Hmac::new_from_slice(&key).expect("HMAC takes a key of any length"))
    }

    fn keyed(&self, viewer: &Viewer) -> Hmac<Sha256> {
        let mut mac = self.0.clone();
        mac.update(viewer.name.as_bytes());
        mac
    }

    /// The token a form of `viewer` carries.
    pub(crate) fn token(&self, viewer: &Viewer) -> String {
        URL_SAFE_NO_PAD.encode(self.keyed(viewer).finalize().into_bytes())
    }

    /// Whether `given` is `viewer`'s token (compared in constant time).
    pub(crate) fn verify(&self, viewer: &Viewer, given: &str) -> bool {
        URL_SAFE_NO_PAD
            .decode(given)
            .is_ok_and(|given| self.keyed(viewer).verify_slice(&given).is_ok())
    }
}

/// Authenticates the request and puts its [`Viewer`] on it; 401 asking for Basic credentials
/// otherwise.
pub(crate) async fn authenticate(
    State(config): State<Arc<ConsoleConfig>>,
    mut request: Request,
    next: Next,
) -> Response {
    if !config.hosts.is_empty() && !known_host(request.headers(), &config.hosts) {
        // A page of another site whose name was rebound to this address (DNS rebinding)
        // reaches the console under that name: refused before anything is read.
        let mut refusal = (StatusCode::MISDIRECTED_REQUEST, "unknown host").into_response();
        harden(refusal.headers_mut());
        return refusal;
    }
    if foreign(request.headers(), request.method()) {
        let mut refusal = (
            StatusCode::FORBIDDEN,
            "the console answers another site's page only to a link followed",
        )
            .into_response();
        harden(refusal.headers_mut());
        return refusal;
    }
    let viewer = match credentials(request.headers()) {
        Some((name, token)) => {
            let digest = digest(&token);
            config
                .users
                .iter()
                .find(|u| {
                    name.as_deref().is_none_or(|n| n == u.name)
                        && subtle::ConstantTimeEq::ct_eq(&u.digest[..], &digest[..]).into()
                })
                .map(|u| Viewer {
                    name: u.name.clone(),
                    role: u.role,
                    payloads: u.payloads,
                })
        }
        None => config.anonymous.map(|role| Viewer {
            name: ANONYMOUS.to_owned(),
            role,
            payloads: false,
        }),
    };
    let Some(viewer) = viewer else {
        let mut refusal = refused();
        harden(refusal.headers_mut());
        return refusal;
    };
    request.extensions_mut().insert(viewer);
    let mut response = next.run(request).await;
    harden(response.headers_mut());
    response
}

/// `(user name, token)` from Basic, `(None, token)` from Bearer.
fn credentials(headers: &HeaderMap) -> Option<(Option<String>, String)> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, rest) = value.split_once(' ')?;
    if scheme.eq_ignore_ascii_case("bearer") {
        return Some((None, rest.trim().to_owned()));
    }
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = String::from_utf8(STANDARD.decode(rest.trim()).ok()?).ok()?;
    let (name, token) = decoded.split_once(':')?;
    Some((Some(name.to_owned()), token.to_owned()))
}

fn refused() -> Response {
    let mut response = (
        StatusCode::UNAUTHORIZED,
        "the inboxed console needs a user name and token",
    )
        .into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Basic realm=\"inboxed console\", charset=\"UTF-8\""),
    );
    response
}

/// Pages show what producers sent: no script but the console's own, no framing, no
/// caching of what a user saw.
fn harden(headers: &mut HeaderMap) {
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; style-src 'unsafe-inline'; script-src 'self'; \
             connect-src 'self'; img-src 'self'; form-action 'self'; \
             frame-ancestors 'none'; base-uri 'none'",
        ),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
}

/// Whether the `Host` header names one of `hosts` (compared without its port, ignoring case).
fn known_host(headers: &HeaderMap, hosts: &[String]) -> bool {
    let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else {
        return false;
    };
    let name = if host.starts_with('[') {
        host.split_inclusive(']').next().unwrap_or(host)
    } else {
        host.rsplit_once(':').map_or(host, |(name, _)| name)
    };
    hosts.iter().any(|h| h.eq_ignore_ascii_case(name))
}

/// Whether a page of another site sent this request, other than by a link followed (a top-
/// level GET navigation, which an alert's link into the console is): an image, a script or a
/// form of another site never reaches a page, not even a confirmation's dry run.
fn foreign(headers: &HeaderMap, method: &axum::http::Method) -> bool {
    let navigated = method == axum::http::Method::GET
        && headers
            .get("sec-fetch-mode")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v == "navigate");
    cross_site(headers) && !navigated
}

/// Whether a state-changing request came from a page of another site (browsers say so in
/// `Sec-Fetch-Site`; a request without it, from a script or an old browser, is judged by its
/// CSRF token alone).
pub(crate) fn cross_site(headers: &HeaderMap) -> bool {
    headers
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v == "cross-site" || v == "same-site")
}
