//! Signing secrets (`sign: aws-sigv4`): every misuse refused at its position with a fix,
//! each beside the nearest declaration that loads; and what a good one compiles into (a
//! signer, one secret per part, placeholders shaped as SDKs take them, the grants).

use super::*;

/// A signing secret `aws_prod` with `body` after its `sign:` line.
fn signer(body: &str) -> String {
    format!("version: 1\nsecrets:\n  aws_prod:\n    sign: aws-sigv4\n{body}")
}

const FROM: &str =
    "    from:\n      access_key_id: { env: AK }\n      secret_access_key: { env: SK }\n";
const HOSTS: &str = "    hosts: [\"*.amazonaws.com\"]\n";

fn good() -> String {
    signer(&format!("{FROM}{HOSTS}"))
}

/// (what, refused declaration, line, column, the problem, the nearest fine declaration).
type Case = (&'static str, String, u64, u64, fn(&Problem) -> bool, String);

fn cases() -> Vec<Case> {
    vec![
        (
            "an unknown kind",
            format!("version: 1\nsecrets:\n  aws_prod:\n    sign: aws-sigv2\n{FROM}{HOSTS}"),
            4,
            11,
            |p| matches!(p, Problem::UnknownSignKind { found, .. } if found == "aws-sigv2"),
            good(),
        ),
        (
            "in: on a signing secret",
            signer(&format!("{FROM}{HOSTS}    in: [header]\n")),
            9,
            9,
            |p| matches!(p, Problem::SigningKey { key: "in", .. }),
            good(),
        ),
        (
            "header: on a signing secret",
            signer(&format!("{FROM}{HOSTS}    header: [Authorization]\n")),
            9,
            13,
            |p| matches!(p, Problem::SigningKey { key: "header", .. }),
            good(),
        ),
        (
            "a literal value on a signing secret",
            signer(&format!("{FROM}{HOSTS}    value: not-the-way-to-give-a-key\n")),
            9,
            12,
            |p| matches!(p, Problem::SigningKey { key: "value", .. }),
            good(),
        ),
        (
            "a missing secret_access_key",
            signer(&format!("    from:\n      access_key_id: {{ env: AK }}\n{HOSTS}")),
            6,
            7,
            |p| matches!(p, Problem::MissingPart { part: "secret_access_key", .. }),
            good(),
        ),
        (
            "one source for the whole credential",
            signer(&format!("    from: {{ env: AWS_CREDENTIALS }}\n{HOSTS}")),
            5,
            18,
            |p| matches!(p, Problem::SigningWholeSource { key: "env", .. }),
            good(),
        ),
        (
            "a part with two sources",
            signer(&format!("    from:\n      access_key_id: {{ env: AK, file: /run/ak }}\n      secret_access_key: {{ env: SK }}\n{HOSTS}")),
            6,
            39,
            |p| matches!(p, Problem::TwoSources { .. }),
            good(),
        ),
        (
            "a part given twice",
            signer(&format!("    from:\n      access_key_id: {{ env: AK }}\n      access_key_id: {{ env: AK2 }}\n      secret_access_key: {{ env: SK }}\n{HOSTS}")),
            7,
            7,
            |p| matches!(p, Problem::DuplicateKey { key } if key == "access_key_id"),
            good(),
        ),
        (
            "sinks other than egress",
            signer(&format!("{FROM}{HOSTS}    sinks: [command]\n")),
            9,
            12,
            |p| matches!(p, Problem::SigningSinks { .. }),
            signer(&format!("{FROM}{HOSTS}    sinks: [egress]\n")),
        ),
        (
            "no hosts",
            signer(FROM),
            3,
            3,
            |p| matches!(p, Problem::EgressWithoutHosts { .. }),
            good(),
        ),
        (
            "a service that is not a signing name",
            signer(&format!("{FROM}{HOSTS}    services: [S3]\n")),
            9,
            16,
            |p| matches!(p, Problem::BadScopeName { what: "service", .. }),
            signer(&format!("{FROM}{HOSTS}    services: [s3]\n")),
        ),
        (
            "regions written empty",
            signer(&format!("{FROM}{HOSTS}    regions: []\n")),
            9,
            14,
            |p| matches!(p, Problem::NoValue { .. }),
            signer(&format!("{FROM}{HOSTS}    regions: [eu-west-1]\n")),
        ),
        (
            "services on a secret that does not sign",
            "version: 1\nsecrets:\n  k:\n    from: { env: K }\n    sinks: [egress]\n    hosts: [a.example.com]\n    services: [s3]\n".to_owned(),
            7,
            15,
            |p| matches!(p, Problem::OnlyForSigning { key, .. } if key == "services"),
            "version: 1\nsecrets:\n  k:\n    from: { env: K }\n    sinks: [egress]\n    hosts: [a.example.com]\n".to_owned(),
        ),
        (
            "a part's source on a secret that does not sign",
            "version: 1\nsecrets:\n  k:\n    from: { access_key_id: { env: K } }\n    sinks: [egress]\n    hosts: [a.example.com]\n".to_owned(),
            4,
            28,
            |p| matches!(p, Problem::OnlyForSigning { key, .. } if key == "from.access_key_id"),
            "version: 1\nsecrets:\n  k:\n    from: { env: K }\n    sinks: [egress]\n    hosts: [a.example.com]\n".to_owned(),
        ),
        (
            "a part named as a declared secret",
            format!("version: 1\nsecrets:\n  aws_prod.access_key_id:\n    from: {{ env: X }}\n    sinks: [command]\n  aws_prod:\n    sign: aws-sigv4\n{FROM}{HOSTS}"),
            6,
            3,
            |p| matches!(p, Problem::PartNameTaken { part: "access_key_id", .. }),
            format!("version: 1\nsecrets:\n  aws_prod_key_id:\n    from: {{ env: X }}\n    sinks: [command]\n  aws_prod:\n    sign: aws-sigv4\n{FROM}{HOSTS}"),
        ),
    ]
}

#[test]
fn every_misuse_of_a_signing_secret_is_refused_at_its_position_beside_a_near_miss_that_loads() {
    for (what, refused, line, column, problem, fine) in cases() {
        let diagnostics = match Policy::parse(&refused, "t.yaml") {
            Ok(_) => panic!("{what}: loads:\n{refused}"),
            Err(d) => d,
        };
        let hits: Vec<&Diagnostic> = diagnostics
            .0
            .iter()
            .filter(|d| problem(&d.problem))
            .collect();
        assert_eq!(hits.len(), 1, "{what}: {diagnostics}");
        assert!(hits[0].is_error(), "{what}: {}", hits[0]);
        let d = hits[0];
        assert_eq!((d.line, d.column), (line, column), "{what}: {d}");
        assert!(d.to_string().contains("\n  help: "), "{what}: {d}");
        if let Err(d) = Policy::parse(&fine, "t.yaml") {
            panic!("{what}: the near miss is refused:\n{fine}\n{d}");
        }
    }
}

#[test]
fn a_signing_secret_compiles_into_a_signer_and_a_secret_per_part() {
    let yaml = "version: 1\nsecrets:\n  gh:\n    from: { env: GH }\n    sinks: [egress]\n    hosts: [api.github.com]\n  aws_prod:\n    sign: aws-sigv4\n    from:\n      access_key_id: { env: AK }\n      secret_access_key: { file: sk }\n      session_token: { env: ST }\n    hosts: [\"*.amazonaws.com\"]\n    services: [s3, bedrock]\n    regions: [eu-west-1]\n";
    let loaded = Policy::parse(yaml, "t.yaml").unwrap();
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let policy = loaded.policy;
    let names: Vec<&str> = policy.secrets().iter().map(SecretDecl::name).collect();
    assert_eq!(
        names,
        [
            "gh",
            "aws_prod.access_key_id",
            "aws_prod.secret_access_key",
            "aws_prod.session_token"
        ]
    );
    let signer = &policy.signers()[0];
    assert_eq!(signer.name(), "aws_prod");
    assert_eq!(signer.kind(), SignKind::AwsSigV4);
    assert_eq!(
        signer.services(),
        Some(&["s3".to_owned(), "bedrock".to_owned()][..])
    );
    assert_eq!(signer.part(SigningPart::SecretAccessKey), Some(2));
    assert_eq!(
        policy.secrets()[3].signs(),
        Some((0, SigningPart::SessionToken))
    );
    // Its hosts are reachable and intercepted, as a grant's are.
    assert_eq!(
        policy.reach("s3.eu-west-1.amazonaws.com", 443),
        Reach::Intercept
    );

    // A part is never swapped into a request, even toward its hosts.
    let auth = Location::Header("authorization".into());
    let refused = policy
        .may_place(
            "aws_prod.access_key_id",
            Sink::Egress,
            "s3.amazonaws.com",
            443,
            &auth,
        )
        .unwrap_err();
    assert_eq!(refused.code(), "signing_secret");
    assert!(
        refused
            .to_string()
            .contains("secret aws_prod signs requests"),
        "{refused}"
    );
    // Toward another host, the fix names the signer's hosts.
    let refused = policy
        .may_place(
            "aws_prod.secret_access_key",
            Sink::Egress,
            "evil.example",
            443,
            &auth,
        )
        .unwrap_err();
    assert!(
        refused.to_string().contains("secrets.aws_prod.hosts"),
        "{refused}"
    );

    // The signing decision: host, service and region.
    assert_eq!(
        policy.may_sign(0, "s3.eu-west-1.amazonaws.com", 443, "s3", "eu-west-1"),
        Ok(())
    );
    let code = |r: Result<(), Ungranted>| r.unwrap_err().code();
    assert_eq!(
        code(policy.may_sign(0, "evil.example", 443, "s3", "eu-west-1")),
        "host_not_granted"
    );
    assert_eq!(
        code(policy.may_sign(0, "iam.amazonaws.com", 443, "iam", "eu-west-1")),
        "service_not_granted"
    );
    assert_eq!(
        code(policy.may_sign(0, "s3.amazonaws.com", 443, "s3", "us-east-1")),
        "region_not_granted"
    );
    let service = policy
        .may_sign(0, "iam.amazonaws.com", 443, "iam", "eu-west-1")
        .unwrap_err();
    assert!(
        service
            .to_string()
            .contains("add iam to secrets.aws_prod.services"),
        "{service}"
    );
}

#[test]
fn part_placeholders_are_shaped_as_sdks_take_them_and_differ_every_run() {
    let policy = Policy::parse(&good(), "t.yaml").unwrap().policy;
    let a = policy.mint_placeholders();
    let b = policy.mint_placeholders();
    let key_id = a.get("aws_prod.access_key_id").unwrap();
    assert_eq!(key_id.len(), 20, "{key_id}");
    assert!(key_id.starts_with("SLUICE"));
    assert!(
        key_id
            .bytes()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit()),
        "{key_id}"
    );
    let secret = a.get("aws_prod.secret_access_key").unwrap();
    assert_eq!(secret.len(), 40, "{secret}");
    assert!(
        secret
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'_'),
        "{secret}"
    );
    assert_ne!(key_id, b.get("aws_prod.access_key_id").unwrap());
    assert_ne!(secret, b.get("aws_prod.secret_access_key").unwrap());
    // The launcher's variables: the part's name, as for any secret.
    assert_eq!(
        placeholder_name("aws_prod.secret_access_key"),
        "AWS_PROD_SECRET_ACCESS_KEY"
    );
}
