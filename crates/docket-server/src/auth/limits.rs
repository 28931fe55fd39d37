//! What `docket serve` configures of auth that the server state holds: the auth mode and the
//! per-token request limits with their state (a rate limiter and the open long-polls).

/// Whether requests must carry a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AuthMode {
    /// Every request is served (loopback only, unless forced).
    #[default]
    Off,
    /// Every request but `/healthz`, `/openapi.json` and the login page needs a token.
    Required,
}

/// Request limits per token (docs: operations/security.md). They apply under `--auth required`, keyed by
/// the token's name, so one busy or runaway client cannot starve the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Requests per second one token may make, on average (0: no limit) [1000].
    pub rate_per_second: u32,
    /// Requests one token may make at once above the average rate [2000].
    pub burst: u32,
    /// Long-polls (claims with `wait`, event streams) one token may hold open at once (0: no
    /// limit) [64].
    pub long_polls: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            rate_per_second: 1000,
            burst: 2000,
            long_polls: 64,
        }
    }
}

type Limiter = governor::DefaultKeyedRateLimiter<String>;

/// The per-token state behind [`Limits`]: a GCRA limiter (the `governor` crate) and the count
/// of open long-polls.
pub(crate) struct Limiters {
    pub(super) limits: Limits,
    rate: Option<Limiter>,
    pub(super) polls: std::sync::Mutex<std::collections::HashMap<String, usize>>,
}

impl Limiters {
    pub(crate) fn new(limits: Limits) -> Self {
        let rate = std::num::NonZeroU32::new(limits.rate_per_second).map(|r| {
            let burst =
                std::num::NonZeroU32::new(limits.burst.max(limits.rate_per_second)).unwrap_or(r);
            governor::RateLimiter::dashmap(governor::Quota::per_second(r).allow_burst(burst))
        });
        Limiters {
            limits,
            rate,
            polls: Default::default(),
        }
    }

    /// Counts one request of `token`; `Err(seconds)`: over the rate, retry after that long.
    pub(super) fn check_rate(&self, token: &str) -> Result<(), u64> {
        use governor::clock::{Clock, DefaultClock};
        let Some(rl) = &self.rate else { return Ok(()) };
        rl.check_key(&token.to_string()).map_err(|not_until| {
            let wait = not_until.wait_time_from(DefaultClock::default().now());
            wait.as_secs() + u64::from(wait.subsec_nanos() > 0)
        })
    }
}

/// One open long-poll of a token; the count drops when this does.
pub struct LongPoll {
    pub(super) limiters: std::sync::Arc<Limiters>,
    pub(super) token: String,
}

impl Drop for LongPoll {
    fn drop(&mut self) {
        let mut m = self
            .limiters
            .polls
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(n) = m.get_mut(&self.token) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                m.remove(&self.token);
            }
        }
    }
}
