//! How often the jail's resolver refuses one name, so that a workload looping on a lookup
//! (or a client retrying A and AAAA on every attempt) leaves one `deny` event per name per
//! window, carrying how many queries it stands for, rather than one line per query.
//!
//! It must never let a refusal go unrecorded: the first query for a name is recorded at
//! once, the ones after it are counted into the next event for that name (at the next
//! query past the window, at the resolver's periodic flush, or when it stops), and a name
//! beyond what it can track is recorded on every query.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How long the queries for one name are gathered into one event.
pub(crate) const WINDOW: Duration = Duration::from_secs(10);

/// The most names tracked at once; past it, every query for an untracked name is an event.
const MAX_NAMES: usize = 4096;

/// The refused names and what is held back for each.
#[derive(Debug, Default)]
pub(crate) struct Denials {
    names: HashMap<String, Held>,
}

#[derive(Debug)]
struct Held {
    /// When the last event for the name was recorded.
    recorded: Instant,
    /// Queries refused since, not yet in any event.
    queries: u64,
}

impl Denials {
    /// A query for `name` was refused at `now`: the count for an event to record now (the
    /// queries it stands for, this one included), or `None` when it is held for a later one.
    pub(crate) fn refused(&mut self, name: &str, now: Instant) -> Option<u64> {
        if let Some(held) = self.names.get_mut(name) {
            if now.duration_since(held.recorded) < WINDOW {
                held.queries += 1;
                return None;
            }
            let count = held.queries + 1;
            *held = Held {
                recorded: now,
                queries: 0,
            };
            return Some(count);
        }
        if self.names.len() >= MAX_NAMES {
            // Names with nothing held and a window passed need no memory any more.
            self.names
                .retain(|_, held| held.queries > 0 || now.duration_since(held.recorded) < WINDOW);
        }
        if self.names.len() < MAX_NAMES {
            self.names.insert(
                name.to_owned(),
                Held {
                    recorded: now,
                    queries: 0,
                },
            );
        }
        Some(1)
    }

    /// Every name with queries held whose window has passed at `now` (all of them when
    /// `all`, as the resolver stops), with their counts; they are then held no more.
    pub(crate) fn due(&mut self, now: Instant, all: bool) -> Vec<(String, u64)> {
        let mut due = Vec::new();
        for (name, held) in &mut self.names {
            if held.queries > 0 && (all || now.duration_since(held.recorded) >= WINDOW) {
                due.push((name.clone(), held.queries));
                *held = Held {
                    recorded: now,
                    queries: 0,
                };
            }
        }
        due.sort();
        due
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_queries_are_one_event_per_window_and_none_is_lost() {
        let mut denials = Denials::default();
        let start = Instant::now();
        assert_eq!(denials.refused("evil.test", start), Some(1));
        for i in 1..=9 {
            let at = start + Duration::from_millis(i * 100);
            assert_eq!(denials.refused("evil.test", at), None);
        }
        // Another name is its own.
        assert_eq!(denials.refused("other.test", start), Some(1));
        // Past the window the next query carries the nine held and itself.
        assert_eq!(denials.refused("evil.test", start + WINDOW), Some(10));
        assert_eq!(denials.refused("evil.test", start + WINDOW), None);
        // Held queries come out at the flush once due, or all of them at the end.
        assert!(denials.due(start + WINDOW, false).is_empty());
        assert_eq!(
            denials.due(start + WINDOW * 2, false),
            [("evil.test".to_owned(), 1)]
        );
        assert_eq!(denials.refused("evil.test", start + WINDOW * 2), None);
        assert_eq!(
            denials.due(start + WINDOW * 2, true),
            [("evil.test".to_owned(), 1)]
        );
        assert!(denials.due(start + WINDOW * 9, true).is_empty());
    }

    #[test]
    fn beyond_what_it_tracks_every_query_is_an_event() {
        let mut denials = Denials::default();
        let now = Instant::now();
        for i in 0..MAX_NAMES {
            assert_eq!(denials.refused(&format!("n{i}.test"), now), Some(1));
        }
        for _ in 0..3 {
            assert_eq!(denials.refused("one-more.test", now), Some(1));
        }
        // Once the windows pass, the names with nothing held make room again.
        let later = now + WINDOW;
        assert_eq!(denials.refused("one-more.test", later), Some(1));
        assert_eq!(denials.refused("one-more.test", later), None);
    }
}
