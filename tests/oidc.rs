//! CI job identity: OpenID Connect tokens made in the test, signed with keys
//! made in the test, checked against a JWKS the test serves on a local port
//! (or a file), mapped by `[[issuer.rule]]`s to scopes and to `by`.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use baton_testkit::{settings_for, shared_redis, unique_prefix, TestApp};
use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{json, Value};

const ORDINARY: &str = "ordinary-token-4f1c2a";

/// A signing key made here, and its public JWK.
struct SigningKey {
    alg: Algorithm,
    kid: String,
    key: EncodingKey,
}

impl SigningKey {
    fn rsa(kid: &str) -> Self {
        use rsa::pkcs1::EncodeRsaPrivateKey;
        use rsa::Generate;
        let private = rsa::PrivateKey::generate();
        let der = private.to_pkcs1_der().unwrap();
        Self {
            alg: Algorithm::RS256,
            kid: kid.into(),
            key: EncodingKey::from_rsa_der(der.as_bytes()),
        }
    }

    fn p256(kid: &str) -> Self {
        use p256::elliptic_curve::Generate;
        use p256::pkcs8::EncodePrivateKey;
        let secret = p256::SecretKey::generate();
        let der = secret.to_pkcs8_der().unwrap();
        Self {
            alg: Algorithm::ES256,
            kid: kid.into(),
            key: EncodingKey::from_ec_der(der.as_bytes()),
        }
    }

    fn jwk(&self) -> Jwk {
        let mut jwk = Jwk::from_encoding_key(&self.key, self.alg).unwrap();
        jwk.common.key_id = Some(self.kid.clone());
        jwk
    }

    fn sign(&self, claims: &Value) -> String {
        let mut header = Header::new(self.alg);
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(&header, claims, &self.key).unwrap()
    }
}

fn jwks(keys: &[&SigningKey]) -> String {
    serde_json::to_string(&JwkSet {
        keys: keys.iter().map(|key| key.jwk()).collect(),
    })
    .unwrap()
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Serves whatever `body` holds at `/jwks`; counts the fetches.
async fn serve_jwks(body: Arc<Mutex<String>>) -> (String, Arc<Mutex<u32>>) {
    let fetches = Arc::new(Mutex::new(0));
    let counted = fetches.clone();
    let app = axum::Router::new().route(
        "/jwks",
        axum::routing::get(move || {
            let body = body.clone();
            let counted = counted.clone();
            async move {
                *counted.lock().unwrap() += 1;
                let text = body.lock().unwrap().clone();
                text
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/jwks", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, fetches)
}

/// Accepts connections and never answers; says how many it accepted.
async fn serve_nothing() -> (String, Arc<Mutex<u32>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/jwks", listener.local_addr().unwrap());
    let accepted = Arc::new(Mutex::new(0));
    let counted = accepted.clone();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            *counted.lock().unwrap() += 1;
            held.push(socket);
        }
    });
    (url, accepted)
}

const ISS: &str = "https://ci.example.test";
const HUNG_ISS: &str = "https://hung.example.test";

fn issuer(url: &str, jwks: &str) -> String {
    format!(
        r#"
[[issuer]]
url = "{url}"
audience = "baton"
jwks = "{jwks}"
[[issuer.rule]]
match = {{ repository = "acme/app", ref = "refs/heads/main" }}
allow = ["write:deploy-app-*"]
name = "{{repository}}@{{ref}}"
"#
    )
}

async fn app_with(file_text: &str) -> (TestApp, std::path::PathBuf) {
    let path = std::env::temp_dir().join(format!("baton-oidc-{}.toml", unique_prefix()));
    std::fs::write(&path, file_text).unwrap();
    let mut settings = settings_for(&shared_redis().url(), &unique_prefix());
    settings.tokens_file = Some(path.clone());
    settings.api_tokens = vec![ORDINARY.into()];
    (TestApp::spawn_with(settings).await, path)
}

fn claims(over: Value) -> Value {
    let mut claims = json!({
        "iss": ISS, "aud": "baton", "exp": now() + 300, "nbf": now() - 10,
        "repository": "acme/app", "ref": "refs/heads/main", "sub": "repo:acme/app",
    });
    for (key, value) in over.as_object().unwrap() {
        claims[key] = value.clone();
    }
    claims
}

async fn acquire(app: &TestApp, token: &str, name: &str) -> (u16, Value) {
    let response = app
        .client
        .post(format!("{}/locks/{name}", app.base))
        .bearer_auth(token)
        .body(r#"{"ttl_ms": 30000}"#)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn job_tokens_are_checked_and_mapped_by_rules() {
    let (rsa_key, ec_key) = (SigningKey::rsa("rsa-1"), SigningKey::p256("ec-1"));
    let body = Arc::new(Mutex::new(jwks(&[&rsa_key, &ec_key])));
    let (url, _) = serve_jwks(body.clone()).await;
    let (app, path) = app_with(&issuer(ISS, &url)).await;

    for key in [&rsa_key, &ec_key] {
        let token = key.sign(&claims(json!({})));
        let (status, lease) = acquire(&app, &token, &format!("deploy-app-{}", key.kid)).await;
        assert_eq!(status, 201, "{lease}");
        assert!(!lease.to_string().contains(&token));
    }
    let history: Value = app
        .client
        .get(format!("{}/locks/deploy-app-rsa-1/history", app.base))
        .bearer_auth(ORDINARY)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        history["entries"][0]["by"], "acme/app@refs/heads/main",
        "{history}"
    );

    let other_key = SigningKey::p256("ec-1");
    let hs256 = {
        // HS256 "signed" with the public key's bytes: the classic confusion.
        let secret = serde_json::to_vec(&ec_key.jwk()).unwrap();
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some("ec-1".into());
        jsonwebtoken::encode(
            &header,
            &claims(json!({})),
            &EncodingKey::from_secret(&secret).unwrap(),
        )
        .unwrap()
    };
    let none = {
        use base64::Engine as _;
        let b64 =
            |v: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
        format!(
            "{}.{}.",
            b64(&json!({"alg": "none"})),
            b64(&claims(json!({})))
        )
    };
    for (token, check) in [
        (ec_key.sign(&claims(json!({"aud": "other"}))), "audience"),
        (
            ec_key.sign(&claims(json!({"iss": "https://elsewhere.test"}))),
            "issuer",
        ),
        (ec_key.sign(&claims(json!({"exp": now() - 120}))), "expired"),
        (
            ec_key.sign(&claims(json!({"nbf": now() + 600}))),
            "not-yet-valid",
        ),
        (other_key.sign(&claims(json!({}))), "signature"),
        (none, "algorithm"),
        (hs256, "algorithm"),
    ] {
        let (status, problem) = acquire(&app, &token, "deploy-app-x").await;
        assert_eq!(status, 401, "{check}: {problem}");
        let detail = problem["detail"].as_str().unwrap();
        assert!(detail.contains(&format!("the {check} check")), "{detail}");
        assert!(!problem.to_string().contains(&token));
    }
    let token = rsa_key.sign(&claims(json!({"ref": "refs/heads/feature"})));
    let (status, problem) = acquire(&app, &token, "deploy-app-y").await;
    assert_eq!(status, 403, "{problem}");
    let token = rsa_key.sign(&claims(json!({})));
    let (status, problem) = acquire(&app, &token, "other-name").await;
    assert_eq!(status, 403, "{problem}");

    // Rotation: a new kid, served later, is fetched.
    let rotated = SigningKey::rsa("rsa-2");
    *body.lock().unwrap() = jwks(&[&rotated]);
    // Keys are fetched again at most every 30 s: until then, 401 signature.
    let token = rotated.sign(&claims(json!({})));
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    loop {
        let (status, answer) = acquire(&app, &token, "deploy-app-r").await;
        if status == 201 {
            break;
        }
        assert_eq!(status, 401, "{answer}");
        assert!(
            std::time::Instant::now() < deadline,
            "rotation never picked up"
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
    }

    std::fs::remove_file(&path).unwrap();
}

#[tokio::test]
async fn a_hung_key_fetch_delays_no_ordinary_request_and_is_answered_503() {
    let key = SigningKey::p256("k");
    let (hung, accepted) = serve_nothing().await;
    let (app, path) = app_with(&issuer(HUNG_ISS, &hung)).await;
    let token = key.sign(&claims(json!({"iss": HUNG_ISS})));
    let waiting = {
        let client = app.client.clone();
        let url = format!("{}/locks/deploy-app-h", app.base);
        tokio::spawn(async move {
            let response = client
                .post(url)
                .bearer_auth(token)
                .body(r#"{"ttl_ms": 30000}"#)
                .send()
                .await
                .unwrap();
            let retry = response.headers().get("retry-after").is_some();
            (response.status().as_u16(), retry)
        })
    };
    tokio::time::timeout(Duration::from_secs(30), async {
        while *accepted.lock().unwrap() == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the key fetch starts");
    let (status, lease) = tokio::time::timeout(
        Duration::from_secs(30),
        acquire(&app, ORDINARY, "ordinary-during-fetch"),
    )
    .await
    .expect("an ordinary request is answered");
    assert_eq!(status, 201, "{lease}");
    assert!(!waiting.is_finished(), "the job's token waits on the fetch");
    let (status, retry) = tokio::time::timeout(Duration::from_secs(60), waiting)
        .await
        .expect("answered")
        .unwrap();
    assert_eq!((status, retry), (503, true));
    std::fs::remove_file(&path).unwrap();
}

#[tokio::test]
async fn a_jwks_file_works() {
    let key = SigningKey::rsa("file-key");
    let keys = std::env::temp_dir().join(format!("baton-oidc-jwks-{}.json", unique_prefix()));
    std::fs::write(&keys, jwks(&[&key])).unwrap();
    let (app, path) = app_with(&issuer(ISS, keys.to_str().unwrap())).await;
    let (status, lease) = acquire(&app, &key.sign(&claims(json!({}))), "deploy-app-f").await;
    assert_eq!(status, 201, "{lease}");
    std::fs::remove_file(&path).unwrap();
    std::fs::remove_file(&keys).unwrap();
}

#[tokio::test]
async fn removing_the_rule_or_the_issuer_refuses_the_next_requests() {
    let key = SigningKey::p256("reload-key");
    let keys = std::env::temp_dir().join(format!("baton-oidc-jwks-{}.json", unique_prefix()));
    std::fs::write(&keys, jwks(&[&key])).unwrap();
    let text = issuer(ISS, keys.to_str().unwrap());
    let (app, path) = app_with(&text).await;
    let token = key.sign(&claims(json!({})));
    assert_eq!(acquire(&app, &token, "deploy-app-1").await.0, 201);
    let until = |expected: u16, name: &'static str| {
        let (app, token) = (&app, &token);
        async move {
            let deadline = std::time::Instant::now() + Duration::from_secs(30);
            loop {
                // SIGHUP reads every service's file again (each test's own).
                unsafe { libc::kill(libc::getpid(), libc::SIGHUP) };
                let (status, answer) = acquire(app, token, name).await;
                if status == expected {
                    return;
                }
                assert!(std::time::Instant::now() < deadline, "{answer}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    };
    std::fs::write(&path, text.replace("refs/heads/main", "refs/heads/release")).unwrap();
    until(403, "deploy-app-2").await;
    std::fs::write(
        &path,
        format!(
            "[[token]]\nname = \"other\"\nvalue = \"{ORDINARY}-other\"\nallow = [\"read:*\"]\n"
        ),
    )
    .unwrap();
    until(401, "deploy-app-3").await;
    std::fs::remove_file(&path).unwrap();
    std::fs::remove_file(&keys).unwrap();
}

/// Not an assertion on time (machines differ): the CPU cost of finding the
/// caller of a request, printed with `--nocapture` (run with `--release` for
/// figures that mean something): an ordinary token beside a job's token
/// with its key cached, RS256 and ES256.
#[test]
fn the_cost_of_a_job_token_beside_an_ordinary_one() {
    let (rsa_key, ec_key) = (SigningKey::rsa("rsa-cost"), SigningKey::p256("ec-cost"));
    let keys = std::env::temp_dir().join(format!("baton-oidc-jwks-{}.json", unique_prefix()));
    std::fs::write(&keys, jwks(&[&rsa_key, &ec_key])).unwrap();
    let path = std::env::temp_dir().join(format!("baton-oidc-{}.toml", unique_prefix()));
    std::fs::write(&path, issuer(ISS, keys.to_str().unwrap())).unwrap();
    let mut settings = settings_for("redis://127.0.0.1:1", "x");
    settings.tokens_file = Some(path.clone());
    settings.api_tokens = vec![ORDINARY.into()];
    let tokens = baton::access::Tokens::load(&settings).unwrap();
    let (rs256, es256) = (
        rsa_key.sign(&claims(json!({}))),
        ec_key.sign(&claims(json!({}))),
    );
    for (what, token, rounds) in [
        ("ordinary token", ORDINARY, 20_000u32),
        ("RS256 job token", rs256.as_str(), 500),
        ("ES256 job token", es256.as_str(), 500),
    ] {
        let started = std::time::Instant::now();
        for _ in 0..rounds {
            assert!(tokens.principal(Some(token.as_bytes())).is_ok());
        }
        println!("{what}: {:?} per request", started.elapsed() / rounds);
    }
    std::fs::remove_file(&path).unwrap();
    std::fs::remove_file(&keys).unwrap();
}
