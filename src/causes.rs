//! An error with its chain of causes on one line: library errors (tonic, hyper, rustls) wrap
//! the one cause an administrator needs several layers deep.

pub fn causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let s_text = s.to_string();
        if !text.contains(&s_text) {
            text.push_str(": ");
            text.push_str(&s_text);
        }
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn every_cause_is_named_once() {
        let e = Outer(std::io::Error::other("certificate unknown"));
        assert_eq!(super::causes(&e), "outer: certificate unknown");
    }
}
