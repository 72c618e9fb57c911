//! A failover's phases, per trial: read from the nodes' corosync and Pacemaker logs (their
//! time stamps have milliseconds), and drawn as an SVG timeline, median and spread per phase,
//! one bar per configuration. Pure functions: tests/cluster.rs tests them, the failover
//! benchmark uses them.

/// The phases of a failover, in the order they happen, as drawn and tabled.
pub const PHASES: [&str; 8] = [
    "corosync: new membership",
    "DC: transition calculated",
    "promote invoked (baseline: group start)",
    "leader key acquired (etcd)",
    "VIP up",
    "first announcement on the wire",
    "promote returned (baseline: group started)",
    "first 200 to the client",
];

/// Indices into PHASES.
pub mod phase {
    pub const MEMBERSHIP: usize = 0;
    pub const TRANSITION: usize = 1;
    pub const INVOKED: usize = 2;
    pub const KEY: usize = 3;
    pub const VIP_UP: usize = 4;
    pub const ANNOUNCED: usize = 5;
    pub const RETURNED: usize = 6;
    pub const FIRST_200: usize = 7;
}

/// The year and the offset to UTC (seconds east) of local time at `unix_s`: log time stamps
/// are local time without a year.
pub fn local_year_and_offset(unix_s: i64) -> (i64, i64) {
    // SAFETY: localtime_r writes into the tm we own; the time_t is a plain integer.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    let t: libc::time_t = unix_s;
    unsafe { libc::localtime_r(&t, &mut tm) };
    (tm.tm_year as i64 + 1900, tm.tm_gmtoff)
}

/// The time stamp that starts a corosync or Pacemaker log line ("Nov 30 15:24:06.051 n2
/// ..."), as Unix milliseconds, for local time in `year` at `utc_offset_s`.
pub fn log_line_unix_ms(line: &str, year: i64, utc_offset_s: i64) -> Option<u64> {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let mut words = line.split_whitespace();
    let first = words.next()?;
    let month = MONTHS.iter().position(|m| *m == first)? as i64 + 1;
    let day: i64 = words.next()?.parse().ok()?;
    let clock = words.next()?;
    let (hms, frac) = clock.split_once('.').unwrap_or((clock, "0"));
    let mut hms = hms.split(':').map(|x| x.parse::<i64>().ok());
    let (h, m, s) = (hms.next()??, hms.next()??, hms.next()??);
    if !(1..=31).contains(&day) || h > 23 || m > 59 || s > 60 || frac.len() > 3 {
        return None;
    }
    let ms: i64 = format!("{frac:0<3}").parse().ok()?;
    let secs =
        hamaster::lease::clock::days_from_civil(year, month, day) * 86_400 + h * 3600 + m * 60 + s
            - utc_offset_s;
    u64::try_from(secs * 1000 + ms).ok()
}

/// The first line of `log` that contains `needle` and is stamped at or after `from_ms` (Unix
/// ms): its time stamp.
pub fn first_logged(log: &str, needle: &str, from_ms: u64) -> Option<u64> {
    let (year, offset) = local_year_and_offset((from_ms / 1000) as i64);
    log.lines()
        .filter(|l| l.contains(needle))
        .filter_map(|l| log_line_unix_ms(l, year, offset))
        .find(|&t| t >= from_ms)
}

/// One configuration's trials: per phase, the milliseconds after the fault (a trial in which
/// a phase does not apply or was not seen has no value there).
pub struct Series {
    pub name: String,
    pub colour: &'static str,
    pub per_phase: Vec<Vec<f64>>,
}

/// (min, median, max) of the values, None for none.
pub fn spread(v: &[f64]) -> Option<(f64, f64, f64)> {
    let mut v: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    Some((v[0], v[v.len() / 2], v[v.len() - 1]))
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The timeline: one band per phase, in each a bar per series from the earliest to the latest
/// trial with a mark and the figure at the median; a time axis in seconds after the fault.
pub fn render_svg(title: &str, phases: &[&str], series: &[Series]) -> String {
    const LEFT: f64 = 300.0;
    const PLOT: f64 = 560.0;
    const ROW: f64 = 16.0;
    const TOP: f64 = 58.0;
    let band = ROW * series.len() as f64 + 10.0;
    let max_ms = series
        .iter()
        .flat_map(|s| s.per_phase.iter().filter_map(|v| spread(v)).map(|x| x.2))
        .fold(1000.0, f64::max);
    let secs = (max_ms / 1000.0).ceil().max(1.0) as usize;
    let x = |ms: f64| LEFT + PLOT * ms / (secs as f64 * 1000.0);
    let height = TOP + band * phases.len() as f64 + 30.0;
    let width = LEFT + PLOT + 80.0;
    let mut o = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width:.0}\" height=\"{height:.0}\" \
         viewBox=\"0 0 {width:.0} {height:.0}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"10\" y=\"20\" font-size=\"14\" font-weight=\"bold\">{}</text>\n",
        escape(title)
    );
    for (k, s) in series.iter().enumerate() {
        let lx = LEFT + 200.0 * k as f64;
        o.push_str(&format!(
            "<rect x=\"{lx:.0}\" y=\"30\" width=\"14\" height=\"8\" fill=\"{}\"/>\
             <text x=\"{:.0}\" y=\"38\">{}</text>\n",
            s.colour,
            lx + 18.0,
            escape(&s.name)
        ));
    }
    let bottom = TOP + band * phases.len() as f64;
    for sec in 0..=secs {
        let gx = x(sec as f64 * 1000.0);
        o.push_str(&format!(
            "<line x1=\"{gx:.1}\" y1=\"{TOP}\" x2=\"{gx:.1}\" y2=\"{bottom}\" stroke=\"#ddd\"/>\
             <text x=\"{gx:.1}\" y=\"{:.0}\" text-anchor=\"middle\">{sec} s</text>\n",
            bottom + 16.0
        ));
    }
    for (p, phase) in phases.iter().enumerate() {
        let y0 = TOP + band * p as f64;
        o.push_str(&format!(
            "<text x=\"{:.0}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>\n",
            LEFT - 8.0,
            y0 + band / 2.0 + 4.0,
            escape(phase)
        ));
        for (k, s) in series.iter().enumerate() {
            let Some((lo, med, hi)) = s.per_phase.get(p).and_then(|v| spread(v)) else {
                continue;
            };
            let y = y0 + 5.0 + ROW * k as f64 + ROW / 2.0;
            o.push_str(&format!(
                "<line x1=\"{:.1}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"{c}\" \
                 stroke-width=\"4\" stroke-linecap=\"round\" opacity=\"0.5\"/>\
                 <circle class=\"median\" cx=\"{:.1}\" cy=\"{y:.1}\" r=\"4.5\" fill=\"{c}\"/>\
                 <text x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\">{med:.0}</text>\n",
                x(lo),
                x(hi).max(x(lo) + 1.0),
                x(med),
                x(hi) + 7.0,
                y + 3.5,
                c = s.colour,
            ));
        }
    }
    o.push_str("</svg>\n");
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The failover timeline's log reading: corosync's and Pacemaker's time stamps (local time,
    /// no year, milliseconds) become Unix milliseconds; the first matching line at or after a
    /// moment is found.
    #[test]
    fn timeline_reads_corosync_and_pacemaker_time_stamps() {
        let corosync = "Nov 30 15:24:06.051 [3642] n2 corosync notice  [TOTEM ] A new membership (2.11) was formed. Members left: 1";
        assert_eq!(log_line_unix_ms(corosync, 2026, 0), Some(1_796_052_246_051));
        // One hour east of UTC: the same wall clock is an hour earlier.
        assert_eq!(
            log_line_unix_ms(corosync, 2026, 3600),
            Some(1_796_052_246_051 - 3_600_000)
        );
        assert_eq!(
            log_line_unix_ms("Feb 29 00:00:00 n1 pacemakerd", 2028, 0),
            Some(1_835_395_200_000)
        );
        assert_eq!(
            log_line_unix_ms("Nov 30 15:24:06.5 x", 2026, 0),
            Some(1_796_052_246_500)
        );
        for bad in [
            "",
            "set_up: Nov 30 15:24:06.051",
            "Nov 32 15:24:06.051 x",
            "Nov 30 25:24:06.051 x",
            "Nov 30 15:24 x",
            "Nov 30 15:24:06.0511 x",
        ] {
            assert_eq!(log_line_unix_ms(bad, 2026, 0), None, "{bad:?}");
        }
        let (year, offset) = local_year_and_offset(1_796_052_246);
        let at = |clock: &str| log_line_unix_ms(&format!("Nov 30 {clock} n2 x"), year, offset);
        let log = format!(
            "{}\n{}\n{}\n",
            "Nov 30 15:24:05.900 n2 pacemaker-schedulerd[1] notice: Calculated transition 5",
            "Nov 30 15:24:06.083 n2 pacemaker-schedulerd[1] notice: Calculated transition 6",
            "Nov 30 15:24:06.303 n2 pacemaker-schedulerd[1] notice: Calculated transition 7",
        );
        let from = at("15:24:06.000").unwrap();
        assert_eq!(
            first_logged(&log, "Calculated transition", from),
            at("15:24:06.083")
        );
        assert_eq!(first_logged(&log, "Calculated transition 5", from), None);
    }

    /// The failover timeline's drawing: a bar per configuration and phase from the earliest to
    /// the latest trial, the median marked where its time puts it, an axis long enough for the
    /// latest phase, nothing for a phase without values.
    #[test]
    fn timeline_svg_draws_median_and_spread_per_phase() {
        let series = [
            Series {
                name: "fast".into(),
                colour: "#1f77b4",
                per_phase: vec![vec![900.0, 1000.0, 1100.0], vec![], vec![2000.0]],
            },
            Series {
                name: "slow <baseline>".into(),
                colour: "#d62728",
                per_phase: vec![vec![3000.0], vec![3500.0, 4200.0], vec![4600.0, 4400.0]],
            },
        ];
        let svg = render_svg("t", &["a", "b", "c"], &series);
        let cx: Vec<f64> = svg
            .split("class=\"median\" cx=\"")
            .skip(1)
            .map(|s| s[..s.find('"').unwrap()].parse().unwrap())
            .collect();
        // Five phases with values (fast has none in b); axis 0..5 s over 560 px from x = 300.
        let want: Vec<f64> = [1000.0, 3000.0, 4200.0, 2000.0, 4600.0]
            .iter()
            .map(|ms| 300.0 + 560.0 * ms / 5000.0)
            .collect();
        assert_eq!(cx.len(), want.len(), "{svg}");
        for (got, want) in cx.iter().zip(&want) {
            assert!((got - want).abs() < 0.1, "median at {got}, want {want}");
        }
        assert!(
            svg.contains(">5 s</text>") && !svg.contains(">6 s</text>"),
            "{svg}"
        );
        assert!(svg.contains("slow &lt;baseline&gt;"), "names are escaped");
        assert!(svg.starts_with("<svg ") && svg.trim_end().ends_with("</svg>"));
    }
}
