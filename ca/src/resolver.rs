//! rustls glue: the certificate resolver that hands out the run CA's leaf for one host.
//!
//! This module owns one decision: whether a TLS handshake for a connection whose host the
//! caller has already decided (the proxy's CONNECT host) gets that host's leaf. It must never
//! hand out a leaf for a name the CA's constraints do not cover, nor for any name but the
//! one it was made for: returning `None` makes rustls abort the handshake.

use std::fmt;
use std::sync::Arc;
use std::time::SystemTime;

use rustls::SignatureScheme;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use crate::RunCa;
use crate::name::LeafName;

/// Whether the client can verify the ECDSA P-256 signatures every leaf makes.
fn accepts_p256(hello: &ClientHello<'_>) -> bool {
    hello
        .signature_schemes()
        .contains(&SignatureScheme::ECDSA_NISTP256_SHA256)
}

/// Hands out one host's leaf, taken from the CA at each handshake (so a renewed one once the
/// first nears its end), for a connection whose host the proxy already knows (its CONNECT
/// host). A ClientHello without SNI gets the leaf (clients
/// send none for IP literals); one whose SNI names another host, or a client that cannot
/// take ECDSA P-256, gets `None` (a handshake failure).
pub(crate) struct FixedResolver {
    pub(crate) ca: Arc<RunCa>,
    pub(crate) name: LeafName,
}

impl ResolvesServerCert for FixedResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        if !accepts_p256(&hello) {
            return None;
        }
        let names_host = match hello.server_name() {
            None => true,
            Some(sni) => LeafName::parse(sni).is_ok_and(|name| name == self.name),
        };
        if !names_host {
            return None;
        }
        self.ca.leaf_named(&self.name, SystemTime::now()).ok()
    }
}

impl fmt::Debug for FixedResolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FixedResolver")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}
