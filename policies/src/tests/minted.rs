//! Minted secrets (`oauth2:`): what a good declaration compiles into (a minter, the access
//! token under the secret's name, one secret per part the grant has, each part granted
//! toward the token endpoint and placed nowhere), and each misuse refused at its position.

use super::*;
use crate::{Grant, MintPart, MintProblem, TokenBody};

fn minted(oauth2: &str, rest: &str) -> String {
    format!(
        "version: 1\nsecrets:\n  google:\n    oauth2:\n{oauth2}    hosts: [\"*.googleapis.com\"]\n    sinks: [egress]\n{rest}"
    )
}

const REFRESH: &str = "      token_url: https://oauth2.googleapis.com/token\n      grant: refresh_token\n      client_id: 1234.apps.googleusercontent.com\n      client_secret: { file: /run/cs }\n      refresh_token: { file: /run/rt }\n";

const JWT: &str = "      token_url: https://oauth2.googleapis.com/token\n      grant: jwt_bearer\n      service_account: { file: /run/sa.json }\n      scopes: [https://www.googleapis.com/auth/cloud-platform]\n";

#[test]
fn a_jwt_bearer_grant_takes_a_key_file_that_the_sandbox_never_hears_of() {
    let loaded = Policy::parse(&minted(JWT, ""), "p.yaml").unwrap();
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let policy = loaded.policy;
    let names: Vec<&str> = policy.secrets().iter().map(|s| s.name()).collect();
    assert_eq!(names, ["google", "google.service_account"]);
    let minter = &policy.minters()[0];
    assert_eq!(minter.grant(), Grant::JwtBearer);
    assert!(minter.client_id().is_none());
    assert_eq!(minter.part(MintPart::ServiceAccount), Some(1));
    assert!(matches!(policy.secrets()[1].source(), Source::File(_)));
    assert!(policy.secrets()[0].in_sandbox());
    assert!(!policy.secrets()[1].in_sandbox());
    // Without its key file, the grant cannot mint.
    let missing = minted(
        &JWT.replace("      service_account: { file: /run/sa.json }\n", ""),
        "",
    );
    let diagnostics = Policy::parse(&missing, "p.yaml").unwrap_err().0;
    assert!(diagnostics.iter().any(|d| matches!(
        d.problem,
        Problem::Mint(MintProblem::Missing {
            key: "service_account",
            ..
        })
    )));
}

#[test]
fn a_refresh_grant_compiles_into_a_minter_and_three_secrets() {
    let loaded = Policy::parse(
        &minted(
            REFRESH,
            "  other:\n    from: { env: O }\n    hosts: [o.test]\n    sinks: [egress]\n",
        ),
        "p.yaml",
    )
    .unwrap();
    let policy = loaded.policy;
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let names: Vec<&str> = policy.secrets().iter().map(|s| s.name()).collect();
    assert_eq!(
        names,
        [
            "google",
            "google.refresh_token",
            "google.client_secret",
            "other"
        ]
    );
    let minter = &policy.minters()[0];
    assert_eq!(minter.grant(), Grant::RefreshToken);
    assert_eq!(minter.body(), TokenBody::Form);
    assert_eq!(minter.token_url().host(), "oauth2.googleapis.com");
    assert_eq!(minter.token_url().path(), "/token");
    assert_eq!(minter.part(MintPart::AccessToken), Some(0));
    assert_eq!(minter.part(MintPart::RefreshToken), Some(1));
    assert_eq!(minter.part(MintPart::ClientSecret), Some(2));
    assert!(matches!(policy.secrets()[0].source(), Source::Minted));
    assert_eq!(
        policy.secrets()[1].mints(),
        Some((0, MintPart::RefreshToken))
    );
    // The token is swapped toward the API; a part toward the token endpoint only, and into
    // no place of a request; the endpoint is intercepted so that sluice can answer there.
    let auth = Location::Header("authorization".into());
    let line = RequestLine::new("GET", "/drive/v3/files");
    assert!(
        policy
            .may(
                "google",
                Sink::Egress,
                "www.googleapis.com",
                443,
                &auth,
                &line
            )
            .is_ok()
    );
    assert!(
        policy
            .may(
                "google.refresh_token",
                Sink::Egress,
                "oauth2.googleapis.com",
                443,
                &Location::Body,
                &line
            )
            .is_err()
    );
    assert!(
        policy
            .may_reach("google.refresh_token", "oauth2.googleapis.com", 443)
            .is_ok()
    );
    assert!(
        policy
            .may_reach("google.refresh_token", "www.googleapis.com", 443)
            .is_err()
    );
    assert!(matches!(
        policy.reach("oauth2.googleapis.com", 443),
        Reach::Intercept
    ));
    assert!(
        policy.secrets()[1]
            .grant_line()
            .starts_with("held by sluice for its token requests to oauth2.googleapis.com:443"),
        "{}",
        policy.secrets()[1].grant_line()
    );
    // The variables the sandbox gets: GOOGLE, GOOGLE_REFRESH_TOKEN, GOOGLE_CLIENT_SECRET.
    let vars: Vec<String> = names.iter().map(|n| placeholder_name(n)).collect();
    assert_eq!(
        &vars[..3],
        ["GOOGLE", "GOOGLE_REFRESH_TOKEN", "GOOGLE_CLIENT_SECRET"]
    );
}

#[test]
fn a_client_credentials_grant_has_a_client_secret_and_no_refresh_token() {
    let oauth2 = "      token_url: https://idp.test:8443/oauth/token\n      grant: client_credentials\n      client_id: { env: CID }\n      client_secret: { env: CS }\n      scopes: [read, write]\n      audience: https://api.test\n      body: json\n";
    let policy = Policy::parse(&minted(oauth2, ""), "p.yaml").unwrap().policy;
    let minter = &policy.minters()[0];
    assert_eq!(minter.grant(), Grant::ClientCredentials);
    assert_eq!(minter.scopes(), ["read", "write"]);
    assert_eq!(minter.audience(), Some("https://api.test"));
    assert_eq!(minter.body(), TokenBody::Json);
    assert_eq!(minter.token_url().port(), 8443);
    assert_eq!(minter.part(MintPart::RefreshToken), None);
    assert!(matches!(minter.client_id(), Some(ClientId::Source(Source::Env(v))) if v == "CID"));
}

/// A declaration, the line its one diagnostic points at, and what that diagnostic must be.
type MisuseCase = (String, u64, fn(&Problem) -> bool);

#[test]
fn each_misuse_is_one_diagnostic_at_its_position() {
    let cases: [MisuseCase; 10] = [
        (
            minted(
                &REFRESH.replace("grant: refresh_token", "grant: password"),
                "",
            ),
            6,
            |p| matches!(p, Problem::Mint(MintProblem::UnknownGrant { found, .. }) if found == "password"),
        ),
        (
            minted(&REFRESH.replace("https://oauth2", "http://oauth2"), ""),
            5,
            |p| matches!(p, Problem::Mint(MintProblem::TokenUrl { .. })),
        ),
        (
            minted(
                &REFRESH.replace("      refresh_token: { file: /run/rt }\n", ""),
                "",
            ),
            5,
            |p| {
                matches!(
                    p,
                    Problem::Mint(MintProblem::Missing {
                        key: "refresh_token",
                        ..
                    })
                )
            },
        ),
        (
            minted(
                &REFRESH.replace("grant: refresh_token", "grant: client_credentials"),
                "",
            ),
            9,
            |p| {
                matches!(
                    p,
                    Problem::Mint(MintProblem::Unused {
                        key: "refresh_token",
                        ..
                    })
                )
            },
        ),
        (
            minted(REFRESH, "    value: \"a-literal-value\"\n"),
            12,
            |p| {
                matches!(
                    p,
                    Problem::Mint(MintProblem::AlsoSourced { key: "value", .. })
                )
            },
        ),
        (
            minted(REFRESH, "").replace("sinks: [egress]", "sinks: [command]"),
            11,
            |p| matches!(p, Problem::Mint(MintProblem::Sinks { .. })),
        ),
        (
            minted(
                &JWT.replace(
                    "grant: jwt_bearer\n",
                    "grant: jwt_bearer\n      client_id: x\n",
                ),
                "",
            ),
            7,
            |p| {
                matches!(
                    p,
                    Problem::Mint(MintProblem::Unused {
                        key: "client_id",
                        ..
                    })
                )
            },
        ),
        (
            minted(
                &format!("{JWT}      client_secret: {{ file: /run/cs }}\n"),
                "",
            ),
            9,
            |p| {
                matches!(
                    p,
                    Problem::Mint(MintProblem::Unused {
                        key: "client_secret",
                        ..
                    })
                )
            },
        ),
        (
            minted(
                &format!("{REFRESH}      service_account: {{ file: /run/sa.json }}\n"),
                "",
            ),
            10,
            |p| {
                matches!(
                    p,
                    Problem::Mint(MintProblem::Unused {
                        key: "service_account",
                        ..
                    })
                )
            },
        ),
        (
            minted(
                &REFRESH.replace("      client_id: 1234.apps.googleusercontent.com\n", ""),
                "",
            ),
            5,
            |p| {
                matches!(
                    p,
                    Problem::Mint(MintProblem::Missing {
                        key: "client_id",
                        ..
                    })
                )
            },
        ),
    ];
    for (yaml, line, is) in cases {
        let diagnostics = Policy::parse(&yaml, "p.yaml").unwrap_err().0;
        let errors: Vec<&Diagnostic> = diagnostics.iter().filter(|d| d.is_error()).collect();
        assert_eq!(errors.len(), 1, "{yaml}\n{diagnostics:?}");
        assert!(is(&errors[0].problem), "{yaml}\n{:?}", errors[0]);
        assert_eq!(errors[0].line, line, "{yaml}\n{}", errors[0]);
        assert!(!errors[0].problem.help().is_empty());
    }
    // A refresh token from the environment is a warning: it loads, and says why.
    let env = minted(
        &REFRESH.replace(
            "refresh_token: { file: /run/rt }",
            "refresh_token: { env: RT }",
        ),
        "",
    );
    let loaded = Policy::parse(&env, "p.yaml").unwrap();
    assert!(matches!(
        loaded.warnings[0].problem,
        Problem::Mint(MintProblem::RefreshTokenLost { key: "env", .. })
    ));
}

/// A decision standing for the run on a minted secret was made about its minter and the
/// sources of its grant: a changed refresh-token file or scope is another credential, the
/// same declaration again is not.
#[test]
fn a_minted_secrets_approval_basis_follows_its_minter_and_its_grants_sources() {
    let basis = |oauth2: &str| {
        let policy = Policy::parse(&minted(oauth2, "    approve: [DELETE]\n"), "p.yaml")
            .unwrap()
            .policy;
        policy
            .approval_basis("google")
            .expect("approve: gives a basis")
    };
    assert_eq!(basis(REFRESH), basis(REFRESH));
    let other_file = REFRESH.replace("/run/rt", "/run/other-rt");
    assert_ne!(basis(REFRESH), basis(&other_file));
    let other_client = REFRESH.replace("1234.apps", "5678.apps");
    assert_ne!(basis(REFRESH), basis(&other_client));
    assert_ne!(
        basis(JWT),
        basis(&JWT.replace("cloud-platform", "devstorage.read_only"))
    );
}
