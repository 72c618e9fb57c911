//! Meta-data XML, generated from an agent's description and its parameter table. The output
//! must satisfy both ra-api-1.dtd (ocf-tester's `xmllint --valid`) and resource-agents'
//! metadata.rng, so it keeps to the attributes both know.

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
}

impl ActionSpec {
    pub const fn new(name: &'static str, timeout: &'static str) -> ActionSpec {
        ActionSpec {
            name,
            timeout,
            interval: None,
            role: None,
            depth: None,
        }
    }
}

/// How the roles of a promotable clone are spelled: Promoted/Unpromoted from Pacemaker 2.1's
/// CIB schema 3.7 on, Master/Slave before (Pacemaker 1.1 and 2.0, pcs 0.9 and 0.10 up to
/// 0.10.8 refuse the new names). Agents describe their actions with the new names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoleNames {
    PromotedUnpromoted,
    MasterSlave,
}

impl RoleNames {
    /// `role` as this generation spells it.
    pub fn spell(self, role: &'static str) -> &'static str {
        match (self, role) {
            (RoleNames::MasterSlave, "Promoted") => "Master",
            (RoleNames::MasterSlave, "Unpromoted") => "Slave",
            (_, r) => r,
        }
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

/// The meta-data document, its roles spelled as `roles`. Infallible by construction: writing
/// to a Vec cannot fail.
pub fn render(agent: &AgentInfo, roles: RoleNames) -> String {
    let mut w = Writer::new_with_indent(Vec::new(), b' ', 2);
    let mut emit = |e: Event| {
        w.write_event(e)
            .expect("writing XML into memory cannot fail")
    };
    emit(Event::Decl(BytesDecl::new("1.0", None, None)));
    emit(Event::DocType(BytesText::from_escaped(
        "resource-agent SYSTEM \"ra-api-1.dtd\"",
    )));
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
    for a in agent.actions {
        let mut el = BytesStart::new("action");
        el.push_attribute(("name", a.name));
        el.push_attribute(("timeout", a.timeout));
        for (key, value) in [
            ("interval", a.interval),
            ("role", a.role.map(|r| roles.spell(r))),
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
        shortdesc: "short <x>",
        longdesc: "long & more",
    };
    static PARAMS: [Param; 1] = [P];
    static ACTIONS: [ActionSpec; 2] = [
        ActionSpec::new("start", "20s"),
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
        let old = render(&info, RoleNames::MasterSlave);
        assert!(old.contains("role=\"Master\""), "{old}");
        let xml = render(&info, RoleNames::PromotedUnpromoted);
        assert!(
            xml.starts_with(
                "<?xml version=\"1.0\"?>\n<!DOCTYPE resource-agent SYSTEM \"ra-api-1.dtd\">"
            ),
            "{xml}"
        );
        assert!(
            xml.contains("<parameter name=\"ip\" unique=\"1\" required=\"1\">"),
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
