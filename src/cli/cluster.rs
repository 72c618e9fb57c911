//! The cluster as Pacemaker shows it, for `hamaster status`: every node's instance of the
//! resource — its role, its promotion score, what its monitor reports (the node attributes of
//! agents::report) and its failed actions with their reasons — from one `crm_mon
//! --output-as=xml` run. It needs no etcd: during an etcd outage it is what is left to look at.

use std::time::Duration;

use serde::Serialize;

use crate::failsafe::clearance::attr;

/// One node, as Pacemaker shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct NodeView {
    pub name: String,
    /// A member with its controller joined (crm_mon's online="true").
    pub online: bool,
    pub standby: bool,
    /// The resource's instance there: Promoted, Unpromoted, Started, ... (Pacemaker 2.0's
    /// Master and Slave as they are); "Stopped" when none runs there.
    pub role: String,
    /// Its promotion score (the node attribute master-RESOURCE); None: none set, the node
    /// cannot be promoted now.
    pub promotion: Option<String>,
    /// What the node's monitor reports (hamaster-RESOURCE-etcd, -watchdog, -vip), by suffix.
    pub report: Vec<(String, String)>,
    /// The resource's failed actions there: "operation: status (reason)".
    pub failures: Vec<String>,
}

/// Every node of `crm_mon --output-as=xml --show-node-attributes`, with `resource`'s
/// instance (its primitive's id, or an anonymous clone's instance `resource:N`). None: not
/// crm_mon's answer (no nodes section).
pub fn parse(xml: &str, resource: &str) -> Option<Vec<NodeView>> {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut p = Parser::new(resource);
    loop {
        match reader.read_event().ok()? {
            // An empty element has no children and no end event: it opens nothing.
            Event::Start(e) => p.element(&e, true),
            Event::Empty(e) => p.element(&e, false),
            Event::End(e) => p.end(e.name().as_ref()),
            Event::Eof => break,
            _ => {}
        }
    }
    p.answered.then_some(p.nodes)
}

/// Where `parse` is in crm_mon's answer, and what it found so far.
struct Parser<'r> {
    resource: &'r str,
    nodes: Vec<NodeView>,
    answered: bool,
    /// Inside <nodes>.
    in_nodes: bool,
    /// Inside one of the resource's <resource>s: its role.
    in_ours: Option<String>,
    /// Inside a <node> of <node_attributes>: its name.
    attributes_of: Option<String>,
}

impl<'r> Parser<'r> {
    fn new(resource: &'r str) -> Parser<'r> {
        Parser {
            resource,
            nodes: Vec::new(),
            answered: false,
            in_nodes: false,
            in_ours: None,
            attributes_of: None,
        }
    }

    fn ours(&self, id: &str) -> bool {
        crate::failsafe::clearance::instance_of(id, self.resource)
    }

    fn node(&mut self, name: &str) -> Option<&mut NodeView> {
        self.nodes.iter_mut().find(|n| n.name == name)
    }

    fn element(&mut self, e: &quick_xml::events::BytesStart, opens: bool) {
        let a = |key: &str| attr(e, key).unwrap_or_default();
        match e.name().as_ref() {
            b"nodes" => (self.answered, self.in_nodes) = (true, opens),
            b"node" if self.in_nodes => self.nodes.push(NodeView {
                name: a("name"),
                online: a("online") == "true",
                standby: a("standby") == "true",
                role: "Stopped".into(),
                ..NodeView::default()
            }),
            b"resource" if opens && self.ours(&a("id")) => self.in_ours = Some(a("role")),
            b"node" if self.in_ours.is_some() => {
                let role = self.in_ours.clone().unwrap_or_default();
                if let Some(n) = self.node(&a("name")) {
                    n.role = role;
                }
            }
            b"node" if opens => self.attributes_of = Some(a("name")),
            b"attribute" => self.attribute(a("name"), a("value")),
            b"failure" => self.failure(&a("op_key"), &a("node"), a("exitstatus"), a("exitreason")),
            _ => {}
        }
    }

    fn end(&mut self, name: &[u8]) {
        match name {
            b"nodes" => self.in_nodes = false,
            b"resource" => self.in_ours = None,
            b"node" => self.attributes_of = None,
            _ => {}
        }
    }

    /// A node attribute: the promotion score, or one of the monitor's reports.
    fn attribute(&mut self, name: String, value: String) {
        let promotion = format!("master-{}", self.resource);
        let prefix = format!("hamaster-{}-", self.resource);
        let Some(of) = self.attributes_of.clone() else {
            return;
        };
        let Some(n) = self.node(&of) else {
            return;
        };
        if name == promotion {
            n.promotion = Some(value);
        } else if let Some(suffix) = name.strip_prefix(&prefix) {
            n.report.push((suffix.to_string(), value));
        }
    }

    /// A failed action (op_key RESOURCE_OPERATION_INTERVAL), when it is the resource's.
    fn failure(&mut self, op: &str, node: &str, status: String, reason: String) {
        let is_ours = op
            .rsplit_once('_')
            .and_then(|(rest, _)| rest.rsplit_once('_'))
            .is_some_and(|(rsc, _)| self.ours(rsc));
        if !is_ours {
            return;
        }
        // crm_mon escapes the agent's reason once more than XML needs (&amp;apos;): unescaped
        // again for reading.
        let reason = quick_xml::escape::unescape(&reason)
            .map(|r| r.into_owned())
            .unwrap_or(reason);
        if let Some(n) = self.node(node) {
            n.failures.push(match reason.is_empty() {
                true => format!("{op}: {status}"),
                false => format!("{op}: {status} ({reason})"),
            });
        }
    }
}

/// How long crm_mon may take.
const CRM_MON: Duration = Duration::from_secs(5);

/// This node's Pacemaker's view of `resource` on every node; Err: why there is none
/// (Pacemaker not running here, crm_mon too slow).
pub fn look(resource: &str) -> Result<Vec<NodeView>, String> {
    let xml = crate::service::tool_run(
        CRM_MON,
        "crm_mon",
        &["--one-shot", "--output-as=xml", "--show-node-attributes"],
    )?;
    parse(&xml, resource).ok_or_else(|| "crm_mon's answer has no nodes".to_string())
}

/// The nodes that could take over now: online, not in standby, not running the promoted
/// instance, with a promotion score.
pub fn promotable_standbys(nodes: &[NodeView]) -> Vec<&NodeView> {
    nodes
        .iter()
        .filter(|n| {
            n.online
                && !n.standby
                && !matches!(n.role.as_str(), "Promoted" | "Master")
                && n.promotion.as_deref().is_some_and(|s| s != "-INFINITY")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pacemaker 2.1.5's `crm_mon --output-as=xml -1 -A` on the lab's three-node cluster 30 s
    /// into an etcd outage (every member stopped), trimmed of its summary and history: the
    /// master holds on n3, the standbys report no etcd and have no promotion score.
    const OUTAGE: &str = r#"<pacemaker-result api-version="2.25" request="crm_mon --output-as=xml -1 -A">
  <nodes>
    <node name="n1" id="1" online="true" standby="false" type="member"/>
    <node name="n2" id="2" online="true" standby="false" type="member"/>
    <node name="n3" id="3" online="true" standby="false" type="member"/>
  </nodes>
  <resources>
    <resource id="lab-fence" resource_agent="stonith:fence_lab" role="Started" active="true" nodes_running_on="1">
      <node name="n1" id="1" cached="true"/>
    </resource>
    <clone id="api-clone" multi_state="true" unique="false">
      <resource id="api" resource_agent="ocf:hamaster:master" role="Promoted" active="true" nodes_running_on="1">
        <node name="n3" id="3" cached="true"/>
      </resource>
      <resource id="api" resource_agent="ocf:hamaster:master" role="Unpromoted" active="true" nodes_running_on="1">
        <node name="n1" id="1" cached="true"/>
      </resource>
      <resource id="api" resource_agent="ocf:hamaster:master" role="Unpromoted" active="true" nodes_running_on="1">
        <node name="n2" id="2" cached="true"/>
      </resource>
    </clone>
  </resources>
  <node_attributes>
    <node name="n1">
      <attribute name="hamaster-api-etcd" value="0/3 members: tcp connect error"/>
      <attribute name="hamaster-api-vip" value="lan0"/>
      <attribute name="hamaster-api-watchdog" value="none: no watchdog device on this node"/>
    </node>
    <node name="n3">
      <attribute name="master-api" value="100"/>
    </node>
  </node_attributes>
  <node_history>
    <node name="n3">
      <resource_history id="api" orphan="false" migration-threshold="1000000">
        <operation_history call="12" task="promote" rc="0" rc_text="ok"/>
      </resource_history>
    </node>
  </node_history>
  <failures>
    <failure op_key="api_monitor_2000" node="n3" exitstatus="promoted (degraded)" exitreason="holding the master through an etcd outage for 0.4 s on corosync&amp;apos;s word" exitcode="191" task="monitor"/>
    <failure op_key="api_monitor_3000" node="n1" exitstatus="OCF_DEGRADED" exitreason="this node cannot be promoted: no etcd member answers" exitcode="190" task="monitor"/>
    <failure op_key="lab-fence_monitor_60000" node="n1" exitstatus="error" exitreason="" exitcode="1" task="monitor"/>
  </failures>
  <status code="0" message="OK"/>
</pacemaker-result>"#;

    #[test]
    fn every_node_with_its_role_score_report_and_failures() {
        let nodes = parse(OUTAGE, "api").expect("crm_mon's answer");
        let roles: Vec<(&str, &str)> = nodes
            .iter()
            .map(|n| (n.name.as_str(), n.role.as_str()))
            .collect();
        assert_eq!(
            roles,
            [
                ("n1", "Unpromoted"),
                ("n2", "Unpromoted"),
                ("n3", "Promoted")
            ]
        );
        let n1 = &nodes[0];
        assert_eq!(n1.promotion, None);
        assert_eq!(
            n1.report,
            [
                ("etcd".into(), "0/3 members: tcp connect error".into()),
                ("vip".into(), "lan0".into()),
                (
                    "watchdog".into(),
                    "none: no watchdog device on this node".into()
                ),
            ]
        );
        // Only the resource's own failures, the reason unescaped.
        assert_eq!(
            n1.failures,
            ["api_monitor_3000: OCF_DEGRADED (this node cannot be promoted: no etcd member answers)"]
        );
        assert_eq!(nodes[2].promotion.as_deref(), Some("100"));
        assert_eq!(
            nodes[2].failures,
            [
                "api_monitor_2000: promoted (degraded) (holding the master through an etcd outage \
              for 0.4 s on corosync's word)"
            ]
        );
        // Nobody could take over: the standbys have no score.
        assert!(promotable_standbys(&nodes).is_empty());
    }

    #[test]
    fn a_stopped_instance_and_another_resource_leave_the_roles_alone() {
        // A stopped instance is an empty element (no node, no end tag); another resource's
        // node comes after it.
        let xml = r#"<pacemaker-result><nodes>
    <node name="a" online="true" standby="false"/>
    <node name="b" online="false" standby="false"/>
    <node name="c" online="true" standby="true"/>
  </nodes><resources>
    <clone id="api-clone">
      <resource id="api:0" role="Slave" active="true"><node name="a" id="1"/></resource>
      <resource id="api" role="Stopped" active="false" nodes_running_on="0"/>
    </clone>
    <resource id="other" role="Started"><node name="c" id="3"/></resource>
  </resources>
  <node_attributes><node name="a"><attribute name="master-api" value="5"/></node>
  <node name="c"><attribute name="master-api" value="5"/></node></node_attributes>
</pacemaker-result>"#;
        let nodes = parse(xml, "api").unwrap();
        let roles: Vec<&str> = nodes.iter().map(|n| n.role.as_str()).collect();
        assert_eq!(roles, ["Slave", "Stopped", "Stopped"]);
        assert!(!nodes[1].online && nodes[2].standby);
        let standbys: Vec<&str> = promotable_standbys(&nodes)
            .iter()
            .map(|n| n.name.as_str())
            .collect();
        assert_eq!(standbys, ["a"], "online, not in standby, with a score");
        assert_eq!(parse("<pacemaker-result/>", "api"), None, "not an answer");
    }
}
