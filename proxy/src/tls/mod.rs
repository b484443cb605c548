//! TLS on the sandbox's leg: the tunnel's [`target`] (the name its grants are decided for,
//! and the check that every request inside names it), terminating the client's TLS with a
//! leaf for that name only ([`terminate`]). The suites it speaks are `suites`', shared with
//! the upstream leg.

pub(crate) mod target;
pub(crate) mod terminate;
