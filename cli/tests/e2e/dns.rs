//! Cluster DNS on real containerd (issue #8): a busybox pod with the default
//! `dnsPolicy` gets the cluster resolv.conf and resolves the `kubernetes`
//! Service (by full name with nslookup, and as `kubernetes.default` through
//! the search path with the libc resolver) to the API server's ClusterIP,
//! asking the `kube-dns` ClusterIP that the service proxy sends to skiff's
//! own DNS server; a headless Service's pods and a StatefulSet-style hostname
//! resolve too; a LoadBalancer Service shows the node's EXTERNAL-IP. The
//! server gets its own service CIDR, cluster DNS IP and DNS port so it
//! cannot meet other servers on the machine. Needs root (containerd, runc,
//! CNI, nft).

use std::time::Duration;

use skiff_node::agent::pod::logs::{self, LogOptions, LogTarget};
use skiff_node::images::BUSYBOX_IMAGE;

use super::containerd::{
    import_busybox, internal_ip, pod, run_octet, run_with_node, wait_node_ready,
};
use super::support::{
    Server, apply, assert_contains, endpoint_slices, eventually, free_port, json,
};

const NODE: &str = "e2e-dns";

/// The networks of one run: distinct per process, so leftovers of other
/// servers cannot match.
struct Networks {
    pod_cidr: String,
    service_cidr: String,
    kubernetes_ip: String,
    cluster_dns: String,
}

fn networks() -> Networks {
    let octet = run_octet();
    Networks {
        pod_cidr: format!("10.237.{octet}.0/24"),
        service_cidr: format!("10.238.{octet}.0/24"),
        kubernetes_ip: format!("10.238.{octet}.1"),
        cluster_dns: format!("10.238.{octet}.10"),
    }
}

#[test]
fn pods_resolve_cluster_names_through_the_cluster_dns() {
    let nets = networks();
    let dns_listen = format!("0.0.0.0:{}", free_port());
    run_with_node(
        "skd",
        &nets.pod_cidr,
        NODE,
        &[
            "--service-cidr",
            &nets.service_cidr,
            "--cluster-dns",
            &nets.cluster_dns,
            "--cluster-dns-listen",
            &dns_listen,
        ],
        |server| scenario(server, &nets),
    );
}

/// Runs `script` in a busybox pod to completion and returns its output.
fn run_pod(server: &Server, name: &str, spec_extra: &str, script: &str) -> String {
    let script = serde_json::to_string(script).expect("script as JSON");
    apply(
        server,
        &format!(
            r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{name}","labels":{{"app":"{name}"}}}},
               "spec":{{"restartPolicy":"Never","terminationGracePeriodSeconds":1{spec_extra},
                 "containers":[{{"name":"main","image":"{BUSYBOX_IMAGE}","command":["sh","-c",{script}]}}]}}}}"#
        ),
    );
    let done = eventually(
        Duration::from_secs(120),
        &format!("{name} finished"),
        || {
            let p = pod(server, name);
            let phase = p["status"]["phase"].as_str().unwrap_or("");
            matches!(phase, "Succeeded" | "Failed").then_some(p)
        },
    );
    let uid = done["metadata"]["uid"].as_str().expect("uid").to_string();
    let log_root = server.data_dir().join("agent/logs/pods");
    let log = logs::read(
        &LogTarget {
            log_root: &log_root,
            namespace: "default",
            name,
            uid: &uid,
            container: "main",
        },
        &LogOptions::default(),
    )
    .expect("container log");
    String::from_utf8_lossy(&log).into_owned()
}

/// Runs `script` in a busybox pod of `namespace` until it succeeds and
/// returns what `kubectl logs` shows of it.
fn run_pod_in(server: &Server, namespace: &str, name: &str, script: &str) -> String {
    apply(
        server,
        &serde_json::json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                "containers": [{"name": "main", "image": BUSYBOX_IMAGE,
                    "command": ["sh", "-c", script]}]}})
        .to_string(),
    );
    let phase = eventually(
        Duration::from_secs(120),
        &format!("{namespace}/{name} finished"),
        || {
            let out = server.kubectl(&["get", "pod", "-n", namespace, name, "-o", "json"]);
            let p = json(&String::from_utf8_lossy(&out.stdout));
            let phase = p["status"]["phase"].as_str().unwrap_or("").to_string();
            matches!(phase.as_str(), "Succeeded" | "Failed").then_some(phase)
        },
    );
    let log = server.kubectl_ok(&["logs", "-n", namespace, name]);
    assert_eq!(phase, "Succeeded", "{namespace}/{name}: {log}");
    log
}

fn scenario(server: &Server, nets: &Networks) {
    let node = wait_node_ready(server, NODE);
    import_busybox(server);

    // The kube-dns Service and the endpoints pointing at skiff's DNS server.
    let dns_svc = eventually(Duration::from_secs(30), "the kube-dns Service", || {
        let out = server.kubectl(&["get", "svc", "-n", "kube-system", "kube-dns", "-o", "json"]);
        out.status
            .success()
            .then(|| json(&String::from_utf8_lossy(&out.stdout)))
    });
    assert_eq!(dns_svc["spec"]["clusterIP"], nets.cluster_dns.as_str());
    let slice = eventually(Duration::from_secs(30), "the kube-dns endpoints", || {
        let managed_by_dns = "endpointslice.kubernetes.io/managed-by=skiff-dns";
        let slices = endpoint_slices(server, "kube-system", managed_by_dns);
        // One slice, this server's, owned by its identity Lease.
        (slices.len() == 1).then(|| slices[0].clone())
    });
    assert_eq!(slice["metadata"]["ownerReferences"][0]["kind"], "Lease");
    let node_ip = internal_ip(&node);
    assert_eq!(slice["endpoints"][0]["addresses"][0], node_ip.as_str());

    // A headless Service whose endpoint has a hostname (as StatefulSet pods do).
    apply(
        server,
        r#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"db"},
           "spec":{"clusterIP":"None","selector":{"app":"db-0"},"ports":[{"name":"sql","port":5432}]}}"#,
    );
    let mut db_ips = Vec::new();
    for member in ["db-0", "db-1"] {
        apply(
            server,
            &format!(
                r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{member}","labels":{{"app":"db-0"}}}},
                   "spec":{{"hostname":"{member}","subdomain":"db","terminationGracePeriodSeconds":1,
                     "containers":[{{"name":"main","image":"{BUSYBOX_IMAGE}","command":["sleep","3600"]}}]}}}}"#
            ),
        );
    }
    for member in ["db-0", "db-1"] {
        db_ips.push(eventually(
            Duration::from_secs(120),
            &format!("{member} Running"),
            || {
                let p = pod(server, member);
                let ip = p["status"]["podIP"].as_str().unwrap_or("").to_string();
                (p["status"]["phase"] == "Running" && !ip.is_empty()).then_some(ip)
            },
        ));
    }
    let db_ip = db_ips[0].clone();

    // busybox's nslookup (1.29 and later) does not apply the search list,
    // so it gets the full name; the libc resolver (ping) shows the search
    // path turning `kubernetes.default` into the Service's name.
    let out = run_pod(
        server,
        "client",
        "",
        "cat /etc/resolv.conf; echo =====; \
         for i in 1 2 3 4 5 6 7 8 9 10; do \
           nslookup kubernetes.default.svc.cluster.local && break; sleep 1; done; echo =====; \
         ping -c 1 -W 1 kubernetes.default; echo =====; \
         nslookup db-0.db.default.svc.cluster.local; echo =====; hostname; echo =====; \
         for i in 1 2 3 4 5 6 7 8 9 10; do \
           nslookup db.default.svc.cluster.local > /tmp/db; \
           [ $(grep -c '^Address: ' /tmp/db) -ge 2 ] && break; sleep 1; done; cat /tmp/db",
    );
    let sections: Vec<&str> = out.split("=====\n").collect();
    assert_eq!(sections.len(), 6, "{out}");
    let resolv = sections[0];
    assert_contains(resolv, &format!("nameserver {}", nets.cluster_dns));
    assert_contains(
        resolv,
        "search default.svc.cluster.local svc.cluster.local cluster.local",
    );
    assert_contains(resolv, "options ndots:5");
    let kubernetes = sections[1];
    assert!(
        kubernetes.contains(&format!("Server:\t\t{}", nets.cluster_dns))
            && kubernetes.contains("Name:\tkubernetes.default.svc.cluster.local")
            && kubernetes.contains(&format!("Address: {}", nets.kubernetes_ip)),
        "nslookup kubernetes.default.svc.cluster.local:\n{kubernetes}"
    );
    let searched = sections[2];
    assert!(
        searched.contains(&format!("PING kubernetes.default ({})", nets.kubernetes_ip)),
        "ping kubernetes.default:\n{searched}"
    );
    let member = sections[3];
    assert!(
        member.contains(&format!("Address: {db_ip}")),
        "nslookup db-0.db:\n{member}"
    );
    assert_eq!(sections[4].trim(), "client");
    // The headless Service's name answers every member's pod IP.
    let headless = sections[5];
    for ip in &db_ips {
        assert!(
            headless.contains(&format!("Address: {ip}")),
            "nslookup db (headless) misses {ip}:\n{headless}"
        );
    }

    // dnsPolicy None: only the pod's own dnsConfig.
    let out = run_pod(
        server,
        "custom",
        r#","dnsPolicy":"None","dnsConfig":{"nameservers":["192.0.2.53"],"searches":["example.test"],"options":[{"name":"ndots","value":"2"}]}"#,
        "cat /etc/resolv.conf",
    );
    assert_contains(&out, "nameserver 192.0.2.53");
    assert_contains(&out, "search example.test");
    assert_contains(&out, "options ndots:2");
    assert!(!out.contains(&nets.cluster_dns), "{out}");

    // Pod to pod by Service name: the short name from the backend's own
    // namespace, the full name from another one.
    server.kubectl_ok(&["create", "namespace", "other-ns"]);
    apply(
        server,
        &format!(
            r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"web-b","namespace":"other-ns","labels":{{"app":"web-b"}}}},
               "spec":{{"terminationGracePeriodSeconds":1,"containers":[{{"name":"httpd","image":"{BUSYBOX_IMAGE}",
                 "command":["sh","-c","mkdir -p /www && echo hello-from-b > /www/index.html && httpd -f -p 8080 -h /www"]}}]}}}}"#
        ),
    );
    apply(
        server,
        r#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"svc-b","namespace":"other-ns"},
           "spec":{"selector":{"app":"web-b"},"ports":[{"port":80,"targetPort":8080}]}}"#,
    );
    let fetch = |url: &str| {
        format!(
            "for i in $(seq 1 30); do busybox timeout 5 wget -q -O - {url} && exit 0; sleep 1; done; exit 1"
        )
    };
    assert_eq!(
        run_pod_in(server, "other-ns", "fetch-short", &fetch("http://svc-b/")),
        "hello-from-b\n",
        "http://svc-b from the Service's namespace"
    );
    assert_eq!(
        run_pod_in(
            server,
            "default",
            "fetch-full",
            &fetch("http://svc-b.other-ns.svc.cluster.local/")
        ),
        "hello-from-b\n",
        "the full name from another namespace"
    );

    // ServiceLB: a LoadBalancer Service shows the node's address.
    apply(
        server,
        r#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"lb"},
           "spec":{"type":"LoadBalancer","selector":{"app":"none"},"ports":[{"port":80}]}}"#,
    );
    eventually(Duration::from_secs(30), "the EXTERNAL-IP", || {
        let table = server.kubectl_ok(&["get", "svc", "lb"]);
        table.contains(&node_ip).then_some(())
    });
}
