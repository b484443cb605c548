//! The run's approvals (`approve:` on a secret): the uses waiting for a person's decision,
//! and the decisions that stand for the rest of the run. One registry for every worker and
//! every generation (a reload keeps what waits and what was decided). The request path
//! waits here (`forward::approval`); the admin endpoint lists and decides
//! (`ops::admin::approvals`).
//!
//! # What it must never do
//!
//! - Hold a value. What it keeps is what the door would log: a secret's name, a host, a
//!   method, a path with its query values elided, a body's size and the SHA-256 of the body
//!   as the sandbox wrote it (placeholders, never values).
//! - Let a use through without a decision: a use waits until one is made for it, or for
//!   its secret, host and method for the run, or its time is up.
//! - Grow without bound: beyond `max_pending` uses waiting, a new one is refused at once.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, PoisonError, RwLock};
use std::time::Duration;

use serde::Serialize;
use sluice_policies::ApprovalBasis;
use tokio::sync::watch;
// The runtime's clock, which the timeouts below run on too (and tests can pause).
use tokio::time::Instant;

/// What waits: a use of a secret (`approve:`), or a host nobody allowed (`egress.ask`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Kind {
    /// A request that would swap a secret whose `approve:` covers its method.
    Use,
    /// A `CONNECT` (or a captured connection) to an `egress.ask` host: a decision for the
    /// run covers the host.
    Host,
}

/// One use of a secret, or one host, that waits for a decision, as the approvers see it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct Ask {
    pub(crate) kind: Kind,
    /// The secret's name (empty for a host, and then not shown).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub(crate) secret: String,
    /// What a decision on it is made about, in the generation it was asked under
    /// (`Policy::approval_basis`; none for a host), never shown: a decision for the run
    /// stands for this basis only, so a reload that points the secret's name at another
    /// credential, or changes its `approve:`, asks again.
    #[serde(skip)]
    pub(crate) basis: Option<ApprovalBasis>,
    /// The host it would go to (as the tunnel names it, port included when not 443).
    pub(crate) host: String,
    pub(crate) method: String,
    /// The path as the sandbox sent it, each query value elided (none for a host).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub(crate) path: String,
    /// The body's size, when it was read whole (a streamed body's is not known yet).
    pub(crate) body_bytes: Option<u64>,
    /// The SHA-256 (hex) of the body as the sandbox wrote it, when read whole.
    pub(crate) body_sha256: Option<String>,
    /// What identical requests share beyond the fields above, never shown: the whole path
    /// and query (the listing's elides query values), and the body's digest; unique for a
    /// body that streams (its bytes are not known yet, so it is never taken for another's).
    #[serde(skip)]
    pub(crate) exact: String,
}

impl Ask {
    /// What identical requests share, so that they wait on one decision.
    fn same_use(&self, other: &Ask) -> bool {
        self.kind == other.kind
            && self.secret == other.secret
            && self.basis == other.basis
            && self.host == other.host
            && self.method == other.method
            && self.exact == other.exact
    }

    /// Whether a decision for the run on `other` covers this use: the same secret, toward
    /// the same host, with the same method (a host's: the same host).
    fn covered_by(&self, other: &Ask) -> bool {
        self.kind == other.kind
            && self.secret == other.secret
            && self.basis == other.basis
            && self.host == other.host
            && self.method == other.method
    }
}

/// Allow or deny.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    Allow,
    Deny,
}

impl Decision {
    /// `allow` or `deny`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Deny => "deny",
        }
    }

    /// From its word.
    pub(crate) fn parse(word: &str) -> Option<Self> {
        match word {
            "allow" => Some(Decision::Allow),
            "deny" => Some(Decision::Deny),
            _ => None,
        }
    }
}

/// For this request only, or for its secret, host and method for the rest of the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scope {
    Once,
    Run,
}

impl Scope {
    /// `once` or `run`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Scope::Once => "once",
            Scope::Run => "run",
        }
    }

    /// From its word.
    pub(crate) fn parse(word: &str) -> Option<Self> {
        match word {
            "once" => Some(Scope::Once),
            "run" => Some(Scope::Run),
            _ => None,
        }
    }
}

/// A decision and where it was made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Verdict {
    pub(crate) decision: Decision,
    pub(crate) scope: Scope,
    /// `admin-api`, `terminal`, `webhook`, or `run` for a decision that stood.
    pub(crate) channel: String,
}

/// How a wait ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Waited {
    /// A decision for this use (or one that stood for the run).
    Decided(Verdict),
    /// Nobody decided in time.
    TimedOut,
    /// Too many uses wait already.
    Full,
}

/// A use waiting, as listed: its id, what it is, and how long it has waited.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Listed {
    pub(crate) id: u64,
    #[serde(flatten)]
    pub(crate) ask: Ask,
    pub(crate) waited_secs: f64,
}

/// What a decision answered, for its `approve` event.
#[derive(Clone, Debug)]
pub(crate) struct Answered {
    pub(crate) ask: Ask,
    pub(crate) waited: Duration,
    /// Other uses waiting that the decision answered too (a `run` decision covers every use
    /// of its secret, host and method).
    pub(crate) also: usize,
    /// The requests it answered: those waiting on this use and on the others.
    pub(crate) requests: usize,
}

/// Why a decision could not be made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DecideError {
    /// No use waits under that id (decided already, timed out, or never).
    NotWaiting,
}

struct Waiting {
    ask: Ask,
    arrived: Instant,
    deadline: Instant,
    verdict: watch::Sender<Option<Waited>>,
}

#[derive(Default)]
struct State {
    next_id: u64,
    waiting: BTreeMap<u64, Waiting>,
}

impl State {
    /// Drops the uses whose time is up or that nobody waits for any more (the client went
    /// away), telling any waiter left that time is up.
    fn prune(&mut self, now: Instant) {
        self.waiting.retain(|_, w| {
            let keep = w.deadline > now && w.verdict.receiver_count() > 0;
            if !keep {
                w.verdict.send_replace(Some(Waited::TimedOut));
            }
            keep
        });
    }
}

/// Decisions for the run: by secret, then each host and method decided, under the basis
/// it was decided on.
type Standing = HashMap<String, Vec<Decided>>;

/// One decision for the run on a secret (or a host).
struct Decided {
    host: String,
    method: String,
    basis: Option<ApprovalBasis>,
    decision: Decision,
}

/// The run's approvals.
pub(crate) struct Approvals {
    state: Mutex<State>,
    /// Read on every use of an approving secret, written once per `run` decision: apart
    /// from what waits, so that a use a decision answers takes no lock a waiter holds.
    standing: RwLock<Standing>,
    timeout: Duration,
    max_pending: usize,
    /// Told of each use that starts waiting (the webhook), outside the lock.
    announce: std::sync::OnceLock<Box<dyn Fn(Listed) + Send + Sync>>,
}

impl Approvals {
    /// An empty registry: uses wait at most `timeout`, at most `max_pending` at once.
    pub(crate) fn new(timeout: Duration, max_pending: usize) -> Self {
        Self {
            state: Mutex::default(),
            standing: RwLock::default(),
            timeout,
            max_pending,
            announce: std::sync::OnceLock::new(),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Calls `announce` with each use that starts waiting from now on (set once).
    pub(crate) fn on_arrival(&self, announce: Box<dyn Fn(Listed) + Send + Sync>) {
        let _ = self.announce.set(announce);
    }

    /// How long a use waits at most.
    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The decision standing for the run on `secret` (declared as `basis` says) toward
    /// `host` with `method`, if one was made: what answers such a use at once, with no copy
    /// and no wait. One made on another basis (before a reload changed where the secret
    /// comes from, or its `approve:`) does not answer.
    pub(crate) fn standing(
        &self,
        secret: &str,
        basis: Option<ApprovalBasis>,
        host: &str,
        method: &str,
    ) -> Option<Decision> {
        let standing = self.standing.read().unwrap_or_else(PoisonError::into_inner);
        standing
            .get(secret)?
            .iter()
            .find(|d| d.host == host && d.method == method && d.basis == basis)
            .map(|d| d.decision)
    }

    /// Waits for a decision on `ask`: at once when one stands for its secret, host and
    /// method; else on the decision for an identical use already waiting, or as a new one.
    pub(crate) async fn wait(&self, ask: Ask) -> Waited {
        let mut arrived = None;
        let mut verdict = {
            let mut state = self.state();
            // Under the lock `decide` writes a run decision under, so none is missed.
            if let Some(decision) = self.standing(&ask.secret, ask.basis, &ask.host, &ask.method) {
                return Waited::Decided(Verdict {
                    decision,
                    scope: Scope::Run,
                    channel: "run".to_owned(),
                });
            }
            let now = Instant::now();
            state.prune(now);
            let joined = state
                .waiting
                .values()
                .find(|w| w.ask.same_use(&ask))
                .map(|w| w.verdict.subscribe());
            match joined {
                Some(verdict) => verdict,
                None if state.waiting.len() >= self.max_pending => return Waited::Full,
                None => {
                    let (sender, verdict) = watch::channel(None);
                    state.next_id += 1;
                    let id = state.next_id;
                    if self.announce.get().is_some() {
                        arrived = Some(Listed {
                            id,
                            ask: ask.clone(),
                            waited_secs: 0.0,
                        });
                    }
                    state.waiting.insert(
                        id,
                        Waiting {
                            ask,
                            arrived: now,
                            deadline: now + self.timeout,
                            verdict: sender,
                        },
                    );
                    verdict
                }
            }
        };
        if let (Some(listed), Some(announce)) = (arrived, self.announce.get()) {
            announce(listed);
        }
        let decided = tokio::time::timeout(self.timeout, verdict.wait_for(Option::is_some))
            .await
            .ok()
            .and_then(|seen| seen.ok().and_then(|waited| waited.clone()));
        drop(verdict);
        match decided {
            Some(waited) => waited,
            // Timed out: the use goes from the list (unless others still wait on it).
            None => {
                self.state().prune(Instant::now());
                Waited::TimedOut
            }
        }
    }

    /// The uses waiting now, oldest first.
    pub(crate) fn list(&self) -> Vec<Listed> {
        let now = Instant::now();
        let mut state = self.state();
        state.prune(now);
        state
            .waiting
            .iter()
            .map(|(&id, w)| Listed {
                id,
                ask: w.ask.clone(),
                waited_secs: now.duration_since(w.arrived).as_secs_f64(),
            })
            .collect()
    }

    /// Decides the use `id`: every request waiting on it goes on (or is refused); a `run`
    /// decision stands for its secret, host and method, and answers every other use of
    /// theirs waiting now.
    pub(crate) fn decide(&self, id: u64, verdict: Verdict) -> Result<Answered, DecideError> {
        let now = Instant::now();
        let mut state = self.state();
        state.prune(now);
        let waiting = state.waiting.remove(&id).ok_or(DecideError::NotWaiting)?;
        // Each request waiting on a use holds a receiver of its verdict.
        let mut requests = waiting.verdict.receiver_count();
        let mut also = 0;
        if verdict.scope == Scope::Run {
            let ask = &waiting.ask;
            let mut standing = self
                .standing
                .write()
                .unwrap_or_else(PoisonError::into_inner);
            // One decision per host, method and basis: one made on another basis stays
            // for the uses still under it (a tunnel on the previous generation), and a
            // decision there never overrides one on the credential in force.
            let decided = standing.entry(ask.secret.clone()).or_default();
            decided.retain(|d| {
                !(d.host == ask.host && d.method == ask.method && d.basis == ask.basis)
            });
            decided.push(Decided {
                host: ask.host.clone(),
                method: ask.method.clone(),
                basis: ask.basis,
                decision: verdict.decision,
            });
            drop(standing);
            let covered: Vec<u64> = state
                .waiting
                .iter()
                .filter(|(_, w)| w.ask.covered_by(ask))
                .map(|(&id, _)| id)
                .collect();
            for other in covered {
                if let Some(w) = state.waiting.remove(&other) {
                    requests += w.verdict.receiver_count();
                    w.verdict
                        .send_replace(Some(Waited::Decided(verdict.clone())));
                    also += 1;
                }
            }
        }
        waiting.verdict.send_replace(Some(Waited::Decided(verdict)));
        Ok(Answered {
            ask: waiting.ask,
            waited: now.duration_since(waiting.arrived),
            also,
            requests,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn ask(path: &str) -> Ask {
        Ask {
            exact: path.into(),
            kind: Kind::Use,
            secret: "prod".into(),
            basis: basis(1),
            host: "api.prod.test".into(),
            method: "DELETE".into(),
            path: path.into(),
            body_bytes: Some(0),
            body_sha256: Some("e3b0".into()),
        }
    }

    /// A basis told apart by `n`.
    fn basis(n: u8) -> Option<ApprovalBasis> {
        Some([n; 32].into())
    }

    fn verdict(decision: Decision, scope: Scope) -> Verdict {
        Verdict {
            decision,
            scope,
            channel: "admin-api".into(),
        }
    }

    /// Waits until `n` uses are listed.
    async fn listed(approvals: &Approvals, n: usize) -> Vec<Listed> {
        for _ in 0..200 {
            let list = approvals.list();
            if list.len() == n {
                return list;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("never {n} waiting: {:?}", approvals.list());
    }

    fn spawn_wait(approvals: &Arc<Approvals>, path: &str) -> tokio::task::JoinHandle<Waited> {
        let (approvals, ask) = (approvals.clone(), ask(path));
        tokio::spawn(async move { approvals.wait(ask).await })
    }

    #[tokio::test]
    async fn a_use_waits_for_its_decision_and_identical_ones_share_it() {
        let approvals = Arc::new(Approvals::new(Duration::from_secs(10), 8));
        let waiters: Vec<_> = (0..5).map(|_| spawn_wait(&approvals, "/x")).collect();
        let list = listed(&approvals, 1).await;
        let once = verdict(Decision::Allow, Scope::Once);
        let answered = approvals.decide(list[0].id, once.clone()).unwrap();
        assert_eq!(answered.ask, ask("/x"));
        for waiter in waiters {
            assert_eq!(waiter.await.unwrap(), Waited::Decided(once.clone()));
        }
        // Decided: the id is gone, and the next identical use waits again.
        let again = approvals.decide(list[0].id, once.clone());
        assert_eq!(again.unwrap_err(), DecideError::NotWaiting);
        let waiter = spawn_wait(&approvals, "/x");
        let list = listed(&approvals, 1).await;
        let deny = verdict(Decision::Deny, Scope::Once);
        approvals.decide(list[0].id, deny.clone()).unwrap();
        assert_eq!(waiter.await.unwrap(), Waited::Decided(deny));
    }

    #[tokio::test]
    async fn a_run_decision_answers_what_waits_and_what_comes_without_asking() {
        let approvals = Arc::new(Approvals::new(Duration::from_secs(10), 8));
        let first = spawn_wait(&approvals, "/a");
        let second = spawn_wait(&approvals, "/b");
        let list = listed(&approvals, 2).await;
        let run = verdict(Decision::Allow, Scope::Run);
        let answered = approvals.decide(list[0].id, run.clone()).unwrap();
        assert_eq!(answered.also, 1);
        assert_eq!(first.await.unwrap(), Waited::Decided(run.clone()));
        assert_eq!(second.await.unwrap(), Waited::Decided(run));
        // Later uses of the same secret, host and method: answered at once, by the run's.
        for path in ["/c", "/d?id=…"] {
            match approvals.wait(ask(path)).await {
                Waited::Decided(v) => {
                    assert_eq!((v.decision, v.scope), (Decision::Allow, Scope::Run));
                    assert_eq!(v.channel, "run");
                }
                other => panic!("{other:?}"),
            }
        }
        // Another method is another use.
        let mut get = ask("/c");
        get.method = "GET".into();
        let waiter = tokio::spawn({
            let approvals = approvals.clone();
            async move { approvals.wait(get).await }
        });
        assert_eq!(listed(&approvals, 1).await[0].ask.method, "GET");
        waiter.abort();
    }

    /// A decision for the run stands for the secret as it was declared when decided: after
    /// a reload points its name at another credential (another basis), uses wait again, and
    /// a decision on the new one replaces the stale one.
    #[tokio::test]
    async fn a_run_decision_does_not_stand_for_another_credential_of_the_same_name() {
        let approvals = Arc::new(Approvals::new(Duration::from_secs(10), 8));
        let waiter = spawn_wait(&approvals, "/a");
        let list = listed(&approvals, 1).await;
        approvals
            .decide(list[0].id, verdict(Decision::Allow, Scope::Run))
            .unwrap();
        waiter.await.unwrap();
        let (prod, host) = ("prod", "api.prod.test");
        assert_eq!(
            approvals.standing(prod, basis(1), host, "DELETE"),
            Some(Decision::Allow)
        );
        assert_eq!(approvals.standing(prod, basis(2), host, "DELETE"), None);
        let mut other = ask("/a");
        other.basis = basis(2);
        let waiter = tokio::spawn({
            let approvals = approvals.clone();
            async move { approvals.wait(other).await }
        });
        let list = listed(&approvals, 1).await;
        assert_eq!(list[0].ask.basis, basis(2));
        approvals
            .decide(list[0].id, verdict(Decision::Deny, Scope::Run))
            .unwrap();
        waiter.await.unwrap();
        assert_eq!(
            approvals.standing(prod, basis(2), host, "DELETE"),
            Some(Decision::Deny)
        );
        // The decision on the earlier basis still answers the uses still under it.
        assert_eq!(
            approvals.standing(prod, basis(1), host, "DELETE"),
            Some(Decision::Allow)
        );
    }

    #[tokio::test]
    async fn time_runs_out_and_the_queue_is_bounded() {
        let approvals = Arc::new(Approvals::new(Duration::from_millis(300), 2));
        let a = spawn_wait(&approvals, "/a");
        let b = spawn_wait(&approvals, "/b");
        listed(&approvals, 2).await;
        assert_eq!(approvals.wait(ask("/c")).await, Waited::Full);
        assert_eq!(a.await.unwrap(), Waited::TimedOut);
        assert_eq!(b.await.unwrap(), Waited::TimedOut);
        assert!(approvals.list().is_empty());
    }

    #[tokio::test]
    async fn a_use_nobody_waits_for_any_more_is_dropped() {
        let approvals = Arc::new(Approvals::new(Duration::from_secs(60), 8));
        let waiter = spawn_wait(&approvals, "/a");
        let list = listed(&approvals, 1).await;
        waiter.abort();
        let _ = waiter.await;
        assert!(approvals.list().is_empty());
        let late = approvals.decide(list[0].id, verdict(Decision::Allow, Scope::Once));
        assert_eq!(late.unwrap_err(), DecideError::NotWaiting);
    }
}
