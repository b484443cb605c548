//! Each problem's stable code (`check --json`'s `code`): one per kind, never changed once
//! released, listed in docs/declaration.md (a test reads them off this file and checks the
//! list).

use super::Problem;

impl Problem {
    /// A stable code for this kind of problem: one per kind, listed in
    /// docs/declaration.md; a problem of a part of the declaration (a rule, a budget, a pin,
    /// a host, a minted secret) has its part's prefix.
    pub fn code(&self) -> &'static str {
        match self {
            Problem::Syntax { .. } => "syntax",
            Problem::UnknownKey { .. } => "unknown-key",
            Problem::DuplicateKey { .. } => "duplicate-key",
            Problem::Unreadable { .. } => "unreadable",
            Problem::Empty => "empty",
            Problem::MissingVersion => "missing-version",
            Problem::UnsupportedVersion { .. } => "unsupported-version",
            Problem::BadSecretName { .. } => "bad-secret-name",
            Problem::UnknownSink { .. } => "unknown-sink",
            Problem::UnknownLocation { .. } => "unknown-location",
            Problem::Host(problem) => problem.code(),
            Problem::Rule(problem) => problem.code(),
            Problem::Budget(problem) => problem.code(),
            Problem::Approve(problem) => problem.code(),
            Problem::Pin(problem) => problem.code(),
            Problem::Mint(problem) => problem.code(),
            Problem::NoSource { .. } => "no-source",
            Problem::TwoSources { .. } => "two-sources",
            Problem::EmptySource { .. } => "empty-source",
            Problem::ValueTooShort { .. } => "value-too-short",
            Problem::ValueUnfitForHeader { .. } => "value-unfit-for-header",
            Problem::PlaceholderAlphabet { .. } => "placeholder-alphabet",
            Problem::PlaceholderTooShort { .. } => "placeholder-too-short",
            Problem::SharedPlaceholder { .. } => "shared-placeholder",
            Problem::PlaceholderContains { .. } => "placeholder-contains",
            Problem::EgressWithoutHosts { .. } => "egress-without-hosts",
            Problem::Unservable { .. } => "unservable",
            Problem::NeedsEgress { .. } => "needs-egress",
            Problem::NoValue { .. } => "no-value",
            Problem::ReservedVariable { .. } => "reserved-variable",
            Problem::NoLocations { .. } => "no-locations",
            Problem::HeaderNamesWithoutHeader { .. } => "header-names-without-header",
            Problem::BadHeaderName { .. } => "bad-header-name",
            Problem::BadCidr { .. } => "bad-cidr",
            Problem::VerbatimPassthrough { .. } => "verbatim-passthrough",
            Problem::AskReachable { .. } => "ask-reachable",
            Problem::UnknownSignKind { .. } => "unknown-sign-kind",
            Problem::SigningKey { .. } => "signing-key",
            Problem::SigningSinks { .. } => "signing-sinks",
            Problem::SigningWholeSource { .. } => "signing-whole-source",
            Problem::MissingPart { .. } => "missing-part",
            Problem::OnlyForSigning { .. } => "only-for-signing",
            Problem::BadScopeName { .. } => "bad-scope-name",
            Problem::PartNameTaken { .. } => "part-name-taken",
            Problem::CredentialLiteral { .. } => "credential-literal",
            Problem::LiteralValue { .. } => "literal-value",
            Problem::CommonWordValue { .. } => "common-word-value",
            Problem::NoSinks { .. } => "no-sinks",
            Problem::HostEngineOnly { .. } => "sinks-for-host-engine-only",
            Problem::BroadWildcard { .. } => "broad-wildcard",
            Problem::PassthroughHost { .. } => "passthrough-host",
            Problem::MetadataReachable { .. } => "metadata-reachable",
        }
    }
}
