//! The demo's stage: a stand-in TLS API with its own CA, the token in a 0600 file, the
//! declaration, a real sluice started in-process, and the sandbox client that holds only
//! the placeholder. Set once; the steps (`steps.rs`) play on it.

use super::*;

/// Everything the steps use: the API, sluice, and the sandbox client.
pub(super) struct Stage {
    pub(super) api: Api,
    pub(super) proxy: Proxy,
    pub(super) sandbox: Sandbox,
    pub(super) placeholder: String,
    pub(super) token_len: usize,
    pub(super) audit_path: PathBuf,
}

impl Stage {
    pub(super) async fn set(
        dir: &Path,
        token: Arc<Zeroizing<String>>,
        say: &mut Narrator<'_>,
    ) -> Result<Stage, DemoError> {
        let token_len = token.len();
        // The API and its test CA, standing in for a real service and the web PKI.
        let pki = ApiPki::mint(&[API_HOST, OTHER_HOST]).map_err(setup("the API's test CA"))?;
        let api_ca = dir.join("api-ca.pem");
        write_new(&api_ca, pki.ca_pem().as_bytes(), 0o644).map_err(setup("the API's test CA"))?;
        let api = Api::start(&pki, token.clone())
            .await
            .map_err(|e| setup("the API's listener")(e.to_string()))?;
        say.heading("The stage")?;
        say.wrapped(
            "",
            &format!(
                "A stand-in API, {API_HOST}, listens on {} over TLS (HTTP/1.1 and HTTP/2). Its \
                 certificate comes from a test CA made for this demo (api-ca.pem); sluice is given \
                 that CA as an upstream root, the way it trusts the web PKI for real APIs.",
                api.addr()
            ),
        )?;

        // The real token, where a platform team would keep it: a private file.
        let token_file = dir.join(TOKEN_FILE);
        write_new(&token_file, token.as_bytes(), 0o600).map_err(setup("the token file"))?;
        say.line("")?;
        say.wrapped(
            "",
            &format!(
                "The real token is {token_len} random characters in {TOKEN_FILE} (mode 0600). \
                 The API accepts it and sluice reads it; the sandbox never sees it, and neither \
                 will you: this demo prints only its length."
            ),
        )?;

        // The declaration: the token, granted to one host, in headers only.
        let yaml = declaration(&token_file);
        write_new(&dir.join("demo.yaml"), yaml.as_bytes(), 0o644).map_err(setup("demo.yaml"))?;
        let loaded = Policy::parse(&yaml, "demo.yaml").map_err(|diagnostics| {
            let text: Vec<String> = diagnostics.0.iter().map(ToString::to_string).collect();
            setup("the declaration")(text.join("; "))
        })?;
        say.line("")?;
        say.line("The declaration sluice loads (demo.yaml):")?;
        say.block(&yaml)?;
        for warning in &loaded.warnings {
            say.line(format!("  lint: {warning}"))?;
        }
        say.line("")?;
        say.wrapped(
            "",
            &format!(
                "It grants {SECRET} to {API_HOST} only, in request headers, on the egress sink; \
                 {OTHER_HOST} is reachable but granted nothing; every other host is refused."
            ),
        )?;

        // A real sluice, in-process: the same `start` that `sluice serve` uses.
        let audit_path = dir.join("audit.jsonl");
        let mut config = ProxyConfig::new(
            loaded.policy,
            SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            audit_path.clone(),
        );
        config.upstream_ca = vec![api_ca];
        config.resolve = [API_HOST, OTHER_HOST]
            .iter()
            .map(|host| ((*host).to_owned(), IpAddr::V4(Ipv4Addr::LOCALHOST)))
            .collect();
        let proxy = start(config)
            .await
            .map_err(|e| setup("sluice")(e.to_string()))?;
        write_new(&dir.join("ca.pem"), proxy.ca_pem().as_bytes(), 0o644)
            .map_err(setup("the run CA file"))?;
        let placeholder = proxy
            .placeholders()
            .get(SECRET)
            .ok_or_else(|| setup("the placeholder")(format!("sluice minted none for {SECRET}")))?
            .to_owned();
        let sandbox = Sandbox::new(proxy.local_addr(), &proxy.proxy_url(), &proxy.ca_pem())
            .map_err(setup("the sandbox client"))?;
        say.line("")?;
        say.wrapped(
            "",
            &format!(
                "sluice listens on {} (the sandbox must present this run's proxy credentials), \
                 with a CA minted for this run alone (ca.pem), name-constrained to {API_HOST} and \
                 {OTHER_HOST}. The sandbox trusts that CA and nothing else.",
                proxy.proxy_url_without_token()
            ),
        )?;
        say.line("")?;
        say.wrapped(
            "",
            &format!(
                "The sandbox holds only the placeholder {placeholder}, minted for this run: it \
                 means nothing to another run, and nothing at all outside sluice."
            ),
        )?;
        Ok(Stage {
            api,
            proxy,
            sandbox,
            placeholder,
            token_len,
            audit_path,
        })
    }

    pub(super) fn bearer(&self) -> String {
        format!("Bearer {}", self.placeholder)
    }
}
