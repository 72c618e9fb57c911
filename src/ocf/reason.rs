//! `ocf-exit-reason:` lines: the one line Pacemaker shows an administrator as the reason an
//! action failed. Exactly one per failed invocation, on stderr.

use std::io::Write;

pub const DEFAULT_PREFIX: &str = "ocf-exit-reason:";

/// Formats the reason line; newlines are folded so the reason stays one line.
pub fn format_reason(prefix: &str, reason: &str) -> String {
    let folded: String = reason
        .chars()
        .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
        .collect();
    format!("{prefix}{folded}")
}

pub fn print_reason(prefix: &str, reason: &str) {
    let line = format_reason(prefix, reason);
    let mut err = std::io::stderr().lock();
    // Nothing useful is left to do when stderr itself is gone.
    let _ = writeln!(err, "{line}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reason_is_one_line_with_the_prefix() {
        assert_eq!(
            format_reason(DEFAULT_PREFIX, "bad ip=\"x\"\nsecond"),
            "ocf-exit-reason:bad ip=\"x\" second"
        );
    }
}
