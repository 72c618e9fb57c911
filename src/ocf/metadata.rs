//! Meta-data XML, generated from an agent's description and its parameter table, in the
//! dialect of the installed Pacemaker (`Generation`). Both dialects satisfy ra-api-1.dtd
//! (ocf-tester's `xmllint --valid`). Pacemaker 2.0's is OCF 1.0 as resource-agents'
//! metadata.rng knows it; from 2.1 on it is OCF 1.1 (pcs's ocf-1.1.rng): roles Promoted and
//! Unpromoted, `reload-agent` and `reloadable="1"`, which the DOCTYPE's internal subset
//! declares on top of ra-api-1.dtd so that the DTD check still holds (docs/pacemaker-generations.md).

use quick_xml::events::{BytesDecl, BytesEnd, BytesStart, BytesText, Event};
use quick_xml::Writer;

use crate::params::Param;

/// One `<action>` line: the operation and the defaults Pacemaker tools advise.
#[derive(Debug, Clone, Copy)]
pub struct ActionSpec {
    pub name: &'static str,
    pub timeout: &'static str,
    pub interval: Option<&'static str>,
    pub role: Option<&'static str>,
    pub depth: Option<&'static str>,
    /// An OCF 1.1 action (reload-agent): left out for Pacemaker before 2.1.
    pub ocf_1_1: bool,
}

impl ActionSpec {
    pub const fn new(name: &'static str, timeout: &'static str) -> ActionSpec {
        ActionSpec {
            name,
            timeout,
            interval: None,
            role: None,
            depth: None,
            ocf_1_1: false,
        }
    }

    /// An action only Pacemaker 2.1 and later call.
    pub const fn ocf_1_1(name: &'static str, timeout: &'static str) -> ActionSpec {
        ActionSpec {
            ocf_1_1: true,
            ..ActionSpec::new(name, timeout)
        }
    }
}

/// The timeout `specs` advertise for action `name` (the first entry of that name): what the
/// action takes when its caller names none. Evaluated at compile time where it is a const: an
/// action missing, or a timeout not in whole seconds ("60s"), does not compile.
pub const fn advertised_timeout(specs: &[ActionSpec], name: &str) -> std::time::Duration {
    let mut i = 0;
    while i < specs.len() {
        if const_eq(specs[i].name, name) {
            return std::time::Duration::from_secs(seconds(specs[i].timeout));
        }
        i += 1;
    }
    panic!("no such action in the meta-data")
}

const fn const_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// "60s" as 60.
const fn seconds(timeout: &str) -> u64 {
    let t = timeout.as_bytes();
    assert!(
        t.len() >= 2 && t[t.len() - 1] == b's',
        "a timeout in seconds"
    );
    let mut n = 0;
    let mut i = 0;
    while i < t.len() - 1 {
        assert!(t[i].is_ascii_digit(), "a timeout in whole seconds");
        n = n * 10 + (t[i] - b'0') as u64;
        i += 1;
    }
    n
}

/// The Pacemaker generation the meta-data is written for, told by the installed CIB schemas
/// (`agents::installed_generation`). Pacemaker 2.1 brought CIB schema 3.7 and OCF 1.1 with it:
/// the roles Promoted/Unpromoted (Pacemaker 1.1 and 2.0, pcs 0.9 and 0.10 up to 0.10.9 refuse
/// them), `reload-agent` and `reloadable` parameters (Pacemaker 2.0 would ignore them and
/// restart on any change). Agents describe their actions with the new role names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Generation {
    /// Pacemaker 1.1 and 2.0: Master/Slave, OCF 1.0.
    Pacemaker20,
    /// Pacemaker 2.1 and later: Promoted/Unpromoted, OCF 1.1.
    Pacemaker21,
}

impl Generation {
    /// `role` as this generation spells it.
    pub fn spell(self, role: &'static str) -> &'static str {
        match (self, role) {
            (Generation::Pacemaker20, "Promoted") => "Master",
            (Generation::Pacemaker20, "Unpromoted") => "Slave",
            (_, r) => r,
        }
    }

    pub fn has_reload_agent(self) -> bool {
        self == Generation::Pacemaker21
    }
}

#[derive(Debug, Clone, Copy)]
pub struct AgentInfo {
    pub name: &'static str,
    pub shortdesc: &'static str,
    pub longdesc: &'static str,
    pub params: &'static [Param],
    pub actions: &'static [ActionSpec],
}

/// ra-api-1.dtd knows neither `reloadable` nor `reload-agent`: declared here, the document
/// stays valid against it (internal declarations come first and win).
const OCF_1_1_SUBSET: &str =
    " [\n<!ATTLIST parameter reloadable (1|0) \"0\">\n<!ATTLIST action name CDATA #REQUIRED>\n]";

/// The meta-data document for `generation`. Infallible by construction: writing to a Vec
/// cannot fail.
pub fn render(agent: &AgentInfo, generation: Generation) -> String {
    let mut w = Writer::new_with_indent(Vec::new(), b' ', 2);
    let mut emit = |e: Event| {
        w.write_event(e)
            .expect("writing XML into memory cannot fail")
    };
    emit(Event::Decl(BytesDecl::new("1.0", None, None)));
    let ocf_1_1 = generation.has_reload_agent();
    let subset = if ocf_1_1 { OCF_1_1_SUBSET } else { "" };
    emit(Event::DocType(BytesText::from_escaped(format!(
        "resource-agent SYSTEM \"ra-api-1.dtd\"{subset}"
    ))));
    let mut root = BytesStart::new("resource-agent");
    root.push_attribute(("name", agent.name));
    // No `version` attribute here: resource-agents' metadata.rng before 4.9 (RHEL 8.4's 4.7)
    // refuses it, and IPaddr2 of that generation has none; the <version> element is OCF's.
    emit(Event::Start(root));
    text_element(&mut emit, "version", None, "1.1");
    text_element(&mut emit, "longdesc", Some("en"), agent.longdesc);
    text_element(&mut emit, "shortdesc", Some("en"), agent.shortdesc);

    emit(Event::Start(BytesStart::new("parameters")));
    for p in agent.params {
        let mut el = BytesStart::new("parameter");
        el.push_attribute(("name", p.name));
        el.push_attribute(("unique", if p.unique { "1" } else { "0" }));
        el.push_attribute(("required", if p.required { "1" } else { "0" }));
        if ocf_1_1 && p.reloadable {
            el.push_attribute(("reloadable", "1"));
        }
        emit(Event::Start(el));
        text_element(&mut emit, "longdesc", Some("en"), p.longdesc);
        text_element(&mut emit, "shortdesc", Some("en"), p.shortdesc);
        let mut content = BytesStart::new("content");
        content.push_attribute(("type", p.kind.dtd_name()));
        if let Some(d) = p.default {
            content.push_attribute(("default", d));
        }
        emit(Event::Empty(content));
        emit(Event::End(BytesEnd::new("parameter")));
    }
    emit(Event::End(BytesEnd::new("parameters")));

    emit(Event::Start(BytesStart::new("actions")));
    for a in agent.actions.iter().filter(|a| ocf_1_1 || !a.ocf_1_1) {
        let mut el = BytesStart::new("action");
        el.push_attribute(("name", a.name));
        el.push_attribute(("timeout", a.timeout));
        for (key, value) in [
            ("interval", a.interval),
            ("role", a.role.map(|r| generation.spell(r))),
            ("depth", a.depth),
        ] {
            if let Some(v) = value {
                el.push_attribute((key, v));
            }
        }
        emit(Event::Empty(el));
    }
    emit(Event::End(BytesEnd::new("actions")));
    emit(Event::End(BytesEnd::new("resource-agent")));
    let mut xml = String::from_utf8(w.into_inner()).expect("quick-xml writes UTF-8");
    xml.push('\n');
    xml
}

fn text_element(emit: &mut impl FnMut(Event), name: &str, lang: Option<&str>, text: &str) {
    let mut el = BytesStart::new(name);
    if let Some(l) = lang {
        el.push_attribute(("lang", l));
    }
    emit(Event::Start(el));
    emit(Event::Text(BytesText::new(text)));
    emit(Event::End(BytesEnd::new(name)));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::Kind;

    const P: Param = Param {
        name: "ip",
        kind: Kind::Integer,
        default: Some("5"),
        required: true,
        unique: true,
        reloadable: true,
        range: None,
        unit: None,
        shortdesc: "short <x>",
        longdesc: "long & more",
    };
    static PARAMS: [Param; 1] = [P];
    static ACTIONS: [ActionSpec; 3] = [
        ActionSpec::new("start", "20s"),
        ActionSpec::ocf_1_1("reload-agent", "10s"),
        ActionSpec {
            interval: Some("10s"),
            role: Some("Promoted"),
            ..ActionSpec::new("monitor", "20s")
        },
    ];

    #[test]
    fn renders_doctype_parameters_escaped_text_and_actions() {
        let info = AgentInfo {
            name: "vip",
            shortdesc: "s",
            longdesc: "l",
            params: &PARAMS,
            actions: &ACTIONS,
        };
        let old = render(&info, Generation::Pacemaker20);
        assert!(old.contains("role=\"Master\""), "{old}");
        assert!(
            old.starts_with(
                "<?xml version=\"1.0\"?>\n<!DOCTYPE resource-agent SYSTEM \"ra-api-1.dtd\">"
            ),
            "{old}"
        );
        assert!(!old.contains("reload"), "{old}");
        let xml = render(&info, Generation::Pacemaker21);
        assert!(
            xml.starts_with(
                "<?xml version=\"1.0\"?>\n<!DOCTYPE resource-agent SYSTEM \"ra-api-1.dtd\" [\n<!ATTLIST parameter reloadable"
            ),
            "{xml}"
        );
        assert!(
            xml.contains("<action name=\"reload-agent\" timeout=\"10s\"/>"),
            "{xml}"
        );
        assert!(
            xml.contains("<parameter name=\"ip\" unique=\"1\" required=\"1\" reloadable=\"1\">"),
            "{xml}"
        );
        assert!(
            xml.contains("<content type=\"integer\" default=\"5\"/>"),
            "{xml}"
        );
        assert!(
            xml.contains("short &lt;x&gt;") && xml.contains("long &amp; more"),
            "{xml}"
        );
        assert!(
            xml.contains(
                "<action name=\"monitor\" timeout=\"20s\" interval=\"10s\" role=\"Promoted\"/>"
            ),
            "{xml}"
        );
    }
}
