//! Fault injection for tests: named points in the write path where a debug build can be
//! made to panic, so the integration tests can prove what a panic there does to the
//! ledger and to the calls in flight.
//!
//! Arming: `REASONING_LEDGER_FAULT=<point>` fires at the first hit of that point,
//! `REASONING_LEDGER_FAULT=<point>:<n>` at the n-th hit (counted per process); either
//! way it fires once, so the same process can show that it goes on serving. Points:
//! `tool-before-write`, `job-after-append`, `after-commit` (see [`FaultPoint`]). The
//! variable is read once, at the first hit; an unknown value is reported on stderr and
//! ignored.
//!
//! Compiled only in debug builds (`cfg(debug_assertions)`): in a release build [`hit`]
//! is an empty inline function and the variable is never read, so a user's binary cannot
//! be made to fail this way. Must not: do anything but panic at an armed point, or be
//! called anywhere but the one-line hooks at the points named here.

/// Where a fault can be injected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FaultPoint {
    /// In a writing tool call (`tools/thinking.rs::record`), after its arguments were
    /// validated and before its job is handed to the writer: the tool's task panics.
    ToolBeforeWrite,
    /// In the write job (on the writer thread, inside the group's transaction), after
    /// the call's events were inserted and before the job returns: the job panics with
    /// rows written, which must abort the whole group.
    JobAfterAppend,
    /// On the writer thread after the group's commit returned and before any caller got
    /// its result: the events are durable but no call of the group can be told so.
    AfterCommit,
}

#[cfg(debug_assertions)]
mod armed {
    use super::FaultPoint;
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// The environment variable that arms a fault point (debug builds only).
    pub(crate) const FAULT_ENV: &str = "REASONING_LEDGER_FAULT";

    impl FaultPoint {
        /// Every point, for parsing.
        pub(crate) const ALL: [FaultPoint; 3] = [
            FaultPoint::ToolBeforeWrite,
            FaultPoint::JobAfterAppend,
            FaultPoint::AfterCommit,
        ];

        /// The name used in [`FAULT_ENV`].
        pub(crate) fn name(self) -> &'static str {
            match self {
                FaultPoint::ToolBeforeWrite => "tool-before-write",
                FaultPoint::JobAfterAppend => "job-after-append",
                FaultPoint::AfterCommit => "after-commit",
            }
        }
    }

    /// An armed point and the hit (1-based) at which it fires.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub(crate) struct Armed {
        pub point: FaultPoint,
        pub on_hit: u64,
    }

    /// Parses `point` or `point:n` (n ≥ 1).
    pub(crate) fn parse(text: &str) -> Result<Armed, String> {
        let (name, count) = match text.trim().split_once(':') {
            Some((name, count)) => (name, Some(count)),
            None => (text.trim(), None),
        };
        let point = FaultPoint::ALL
            .into_iter()
            .find(|p| p.name() == name)
            .ok_or_else(|| {
                let known: Vec<&str> = FaultPoint::ALL.iter().map(|p| p.name()).collect();
                format!("unknown fault point {name:?}; known: {}", known.join(", "))
            })?;
        let on_hit = match count {
            None => 1,
            Some(count) => match count.parse::<u64>() {
                Ok(n) if n >= 1 => n,
                _ => return Err(format!("fault hit count {count:?} is not a number ≥ 1")),
            },
        };
        Ok(Armed { point, on_hit })
    }

    fn armed() -> Option<Armed> {
        static ARMED: OnceLock<Option<Armed>> = OnceLock::new();
        *ARMED.get_or_init(|| {
            let text = std::env::var(FAULT_ENV).ok()?;
            match parse(&text) {
                Ok(armed) => Some(armed),
                Err(problem) => {
                    tracing::warn!(%problem, "{FAULT_ENV} ignored");
                    None
                }
            }
        })
    }

    pub(super) fn hit(point: FaultPoint) {
        static HITS: AtomicU64 = AtomicU64::new(0);
        let Some(armed) = armed() else { return };
        if armed.point != point {
            return;
        }
        let hit = HITS.fetch_add(1, Ordering::SeqCst) + 1;
        if hit == armed.on_hit {
            panic!("injected fault at {} (hit {hit})", point.name());
        }
    }
}

/// Marks a fault point: panics if [`FAULT_ENV`] armed this point and this is the hit it
/// names; otherwise does nothing. Debug builds only.
#[cfg(debug_assertions)]
pub(crate) fn hit(point: FaultPoint) {
    armed::hit(point);
}

/// Marks a fault point; release builds carry no fault injection.
#[cfg(not(debug_assertions))]
#[inline(always)]
pub(crate) fn hit(_point: FaultPoint) {}

#[cfg(all(test, debug_assertions))]
mod tests {
    use super::armed::{Armed, parse};
    use super::*;

    #[test]
    fn fault_spec_parses_a_point_and_an_optional_hit_count() {
        assert_eq!(
            parse("job-after-append"),
            Ok(Armed {
                point: FaultPoint::JobAfterAppend,
                on_hit: 1
            })
        );
        assert_eq!(
            parse("after-commit:3"),
            Ok(Armed {
                point: FaultPoint::AfterCommit,
                on_hit: 3
            })
        );
        assert!(parse("after-commit:0").is_err());
        assert!(parse("after-commit:x").is_err());
        assert!(parse("nowhere").unwrap_err().contains("tool-before-write"));
    }
}
