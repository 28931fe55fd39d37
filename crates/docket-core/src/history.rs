//! The charts' history (issue 27): per queue and minute, finished tasks (completed, discarded,
//! cancelled), queue depth (available and running tasks, sampled once a minute) and pickup
//! latency (how long a task waited between its `run_at` and the start of its last attempt) in
//! fixed buckets. Kept a day ([`crate::counts::MINUTES_KEPT`]) and written by the kept counts'
//! step over the same ranges, so each finished task lands once.
//!
//! Latency is kept as a histogram, not as percentiles: histograms add up across queues and
//! minutes, percentiles do not. A percentile read from it is the upper bound of the bucket it
//! falls in ([`percentile`]), as Prometheus's `histogram_quantile` bounds it.

use crate::Timestamp;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Upper bounds (exclusive, ms) of the latency buckets; the last bucket holds the rest.
/// The store's statements get their `CASE` from these bounds (`{latency_bucket:…}` in
/// `docket-store/src/sql.rs`), so SQL and this rule cannot drift; the conformance case
/// `counts_stay_exact` checks a task in each of several buckets.
pub const LATENCY_BOUNDS_MS: [i64; 12] = [
    10, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 30_000, 60_000, 300_000,
];

/// Number of latency buckets ([`LATENCY_BOUNDS_MS`] and one for the rest).
pub const BUCKETS: usize = LATENCY_BOUNDS_MS.len() + 1;

/// The bucket of a latency of `ms` milliseconds (negative: 0).
pub fn bucket(ms: i64) -> usize {
    LATENCY_BOUNDS_MS
        .iter()
        .position(|b| ms < *b)
        .unwrap_or(LATENCY_BOUNDS_MS.len())
}

/// A bucket in words: `< 250 ms`, `≥ 5 min`.
pub fn bucket_label(i: usize) -> String {
    let fmt = |ms: i64| match ms {
        ms if ms < 1_000 => format!("{ms} ms"),
        ms if ms < 60_000 => format!("{} s", ms as f64 / 1_000.0),
        ms => format!("{} min", ms / 60_000),
    };
    match LATENCY_BOUNDS_MS.get(i) {
        Some(b) => format!("< {}", fmt(*b)),
        None => format!("≥ {}", fmt(LATENCY_BOUNDS_MS[LATENCY_BOUNDS_MS.len() - 1])),
    }
}

/// The bucket holding quantile `q` (0..=1) of histogram `hist` (counts by bucket); `None`
/// when it is empty.
pub fn percentile(hist: &[i64; BUCKETS], q: f64) -> Option<usize> {
    let total: i64 = hist.iter().map(|n| (*n).max(0)).sum();
    if total == 0 {
        return None;
    }
    let want = ((total as f64) * q.clamp(0.0, 1.0)).ceil().max(1.0) as i64;
    let mut seen = 0;
    for (i, n) in hist.iter().enumerate() {
        seen += (*n).max(0);
        if seen >= want {
            return Some(i);
        }
    }
    Some(BUCKETS - 1)
}

/// One minute of one queue or of all of them, as the store reads it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Minute {
    /// Start of the minute.
    pub minute: Timestamp,
    /// Tasks completed in it.
    pub completed: i64,
    /// Tasks discarded in it.
    pub discarded: i64,
    /// Tasks cancelled in it.
    pub cancelled: i64,
    /// Available tasks at its start (`None`: not sampled).
    pub available: Option<i64>,
    /// Running tasks at its start (`None`: not sampled).
    pub running: Option<i64>,
}

/// Tasks finished in `minute` whose pickup latency fell in `bucket`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyCount {
    /// Start of the minute.
    pub minute: Timestamp,
    /// Index into [`LATENCY_BOUNDS_MS`] (the last: the rest).
    pub bucket: usize,
    /// How many.
    pub n: i64,
}

/// What the charts draw over a range, as the store reads it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct History {
    /// Minutes with anything in them, oldest first.
    pub minutes: Vec<Minute>,
    /// Latency counts, any order.
    pub latency: Vec<LatencyCount>,
}

/// One bar of a chart: a span of minutes folded.
#[derive(Debug, Clone, PartialEq)]
pub struct Bin {
    /// Start of the span.
    pub start: Timestamp,
    /// Completed in it.
    pub completed: i64,
    /// Discarded or cancelled in it.
    pub failed: i64,
    /// Most available tasks sampled in it (`None`: no sample).
    pub available: Option<i64>,
    /// Most running tasks sampled in it.
    pub running: Option<i64>,
    /// Pickup latency histogram of the tasks finished in it.
    pub latency: [i64; BUCKETS],
}

/// The chart's range: the last hour by minute, or the last day by 15 minutes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Range {
    /// 60 bins of a minute.
    Hour,
    /// 96 bins of 15 minutes.
    Day,
}

impl Range {
    /// `hour` or `day`.
    pub fn parse(s: &str) -> Option<Range> {
        match s {
            "hour" => Some(Range::Hour),
            "day" => Some(Range::Day),
            _ => None,
        }
    }

    /// Its name.
    pub fn as_str(self) -> &'static str {
        match self {
            Range::Hour => "hour",
            Range::Day => "day",
        }
    }

    /// (bins, width of one).
    pub fn shape(self) -> (usize, Duration) {
        match self {
            Range::Hour => (60, Duration::from_secs(60)),
            Range::Day => (96, Duration::from_secs(15 * 60)),
        }
    }

    /// Where the range starts when it ends at `now`: the start of the first bin.
    pub fn since(self, now: Timestamp) -> Timestamp {
        let (n, w) = self.shape();
        crate::time::sub(trunc(now, w), w * (n as u32 - 1))
    }

    /// `h` folded into this range's bins ending at `now`: sums of the counts, the largest
    /// depth sampled, the histograms added. Minutes outside the range are left out.
    pub fn bins(self, h: &History, now: Timestamp) -> Vec<Bin> {
        let (n, w) = self.shape();
        let since = self.since(now);
        let mut bins: Vec<Bin> = (0..n)
            .map(|i| Bin {
                start: crate::time::add(since, w * i as u32),
                completed: 0,
                failed: 0,
                available: None,
                running: None,
                latency: [0; BUCKETS],
            })
            .collect();
        let index = |t: Timestamp| -> Option<usize> {
            let ms = (t - since).num_milliseconds();
            if ms < 0 {
                return None;
            }
            let i = (ms / w.as_millis().max(1) as i64) as usize;
            (i < n).then_some(i)
        };
        for m in &h.minutes {
            if let Some(i) = index(m.minute) {
                let b = &mut bins[i];
                b.completed = b.completed.saturating_add(m.completed);
                b.failed = b
                    .failed
                    .saturating_add(m.discarded)
                    .saturating_add(m.cancelled);
                b.available = max_opt(b.available, m.available);
                b.running = max_opt(b.running, m.running);
            }
        }
        for l in &h.latency {
            if let (Some(i), true) = (index(l.minute), l.bucket < BUCKETS) {
                bins[i].latency[l.bucket] = bins[i].latency[l.bucket].saturating_add(l.n);
            }
        }
        bins
    }
}

fn max_opt(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

/// `t` cut down to a multiple of `w` since the epoch.
pub fn trunc(t: Timestamp, w: Duration) -> Timestamp {
    let w = w.as_millis().max(1) as i64;
    let ms = t.timestamp_millis();
    let cut = ms - ms.rem_euclid(w);
    Timestamp::from_timestamp_millis(cut).unwrap_or(t)
}

/// The minute whose depth a step moving the kept counts from `from` to `to` samples: the
/// start of the minute `to` is in, when that start lies in (`from`, `to`] — once per minute
/// however many nodes step, since the counts' lock orders the steps.
pub fn depth_minute(from: Timestamp, to: Timestamp) -> Option<Timestamp> {
    let m = trunc(to, Duration::from_secs(60));
    (m > from && m <= to).then_some(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn t(s: i64) -> Timestamp {
        chrono::Utc.timestamp_opt(s, 0).unwrap()
    }

    #[test]
    fn buckets_and_percentiles() {
        assert_eq!(bucket(-5), 0);
        assert_eq!(bucket(9), 0);
        assert_eq!(bucket(10), 1);
        assert_eq!(bucket(299_999), 11);
        assert_eq!(bucket(i64::MAX), 12);
        assert_eq!(bucket_label(3), "< 250 ms");
        assert_eq!(bucket_label(6), "< 2.5 s");
        assert_eq!(bucket_label(12), "≥ 5 min");
        let mut h = [0; BUCKETS];
        assert_eq!(percentile(&h, 0.5), None);
        h[1] = 98;
        h[7] = 2;
        assert_eq!(percentile(&h, 0.5), Some(1));
        assert_eq!(percentile(&h, 0.98), Some(1));
        assert_eq!(percentile(&h, 0.99), Some(7));
        assert_eq!(percentile(&h, 5.0), Some(7), "clamped");
    }

    #[test]
    fn bins_fold_minutes() {
        // 2027-01-15 08:00 UTC, on the hour.
        const B: i64 = 1_800_000_000;
        let now = t(B + 125);
        assert_eq!(Range::Hour.since(now), t(B + 120 - 59 * 60));
        let m = |s: i64, c: i64, a: Option<i64>| Minute {
            minute: t(s),
            completed: c,
            discarded: 1,
            cancelled: 0,
            available: a,
            running: None,
        };
        let h = History {
            minutes: vec![
                m(B + 120, 5, Some(7)),
                m(B + 60, 3, Some(9)),
                m(0, 100, Some(1)),
            ],
            latency: vec![LatencyCount {
                minute: t(B + 120),
                bucket: 4,
                n: 2,
            }],
        };
        let b = Range::Hour.bins(&h, now);
        assert_eq!(b.len(), 60);
        assert_eq!(
            (b[59].completed, b[59].failed, b[59].available),
            (5, 1, Some(7))
        );
        assert_eq!(b[58].completed, 3);
        assert_eq!(b[59].latency[4], 2);
        assert_eq!(
            b.iter().map(|x| x.completed).sum::<i64>(),
            8,
            "the old minute is out"
        );
        let d = Range::Day.bins(&h, now);
        assert_eq!(d.len(), 96);
        assert_eq!(
            (d[95].completed, d[95].available),
            (8, Some(9)),
            "largest depth"
        );
    }

    #[test]
    fn depth_is_sampled_once_a_minute() {
        assert_eq!(depth_minute(t(58), t(61)), Some(t(60)));
        assert_eq!(depth_minute(t(60), t(61)), None);
        assert_eq!(depth_minute(t(61), t(62)), None);
        assert_eq!(depth_minute(t(59), t(60)), Some(t(60)));
    }
}
