//! Authorization from the attacker's side: a ServiceAccount token is only
//! worth what RBAC grants it, with kubectl and the Python client seeing
//! upstream's refusals.

use std::path::{Path, PathBuf};

use super::support::{Kubectl, Server, assert_contains, bind_account, python_ok, service_account};

/// A server with namespace `a` and its service account `probe`, granted
/// nothing yet, and a kubeconfig holding the account's token: the account
/// the cases here probe the API as.
fn server_with_probe() -> (Server, PathBuf) {
    let server = Server::start();
    server.kubectl_ok(&["create", "namespace", "a"]);
    let probe = service_account(&server, "a", "probe");
    (server, probe)
}

/// kubectl as the user of `kubeconfig`, which must be allowed; its output.
fn ok_as(kubeconfig: &Path, args: &[&str]) -> String {
    Kubectl::new(kubeconfig).ok(args)
}

/// kubectl as the user of `kubeconfig`, which must be refused; its error
/// output.
fn refused_as(kubeconfig: &Path, args: &[&str]) -> String {
    Kubectl::new(kubeconfig).err(args)
}

const PRIVILEGED_POD: &str = r#"{"apiVersion": "v1", "kind": "Pod",
  "metadata": {"name": "owned", "namespace": "kube-system"},
  "spec": {"hostNetwork": true, "hostPID": true, "containers": [{"name": "c",
    "image": "busybox", "securityContext": {"privileged": true}}]}}"#;

#[test]
fn a_service_account_without_grants_gets_nothing() {
    let (server, probe) = server_with_probe();

    let err = refused_as(&probe, &["get", "secrets", "-A"]);
    assert_contains(
        &err,
        r#"Error from server (Forbidden): secrets is forbidden: User "system:serviceaccount:a:probe" cannot list resource "secrets" in API group "" at the cluster scope"#,
    );
    let err = refused_as(&probe, &["get", "configmaps", "-n", "a"]);
    assert_contains(
        &err,
        r#"cannot list resource "configmaps" in API group "" in the namespace "a""#,
    );
    let out = Kubectl::new(&probe).stdin(&["create", "-f", "-"], PRIVILEGED_POD);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("Forbidden"), "{err}");
    let err = refused_as(&probe, &["delete", "node", "anything"]);
    assert_contains(
        &err,
        r#"cannot delete resource "nodes" in API group "" at the cluster scope"#,
    );
    // Nothing was created on its behalf.
    let pods = server.kubectl_ok(&["get", "pods", "-n", "kube-system", "-o", "name"]);
    assert!(!pods.contains("owned"), "{pods}");
    // Discovery and the public paths stay open to any authenticated user.
    ok_as(&probe, &["api-versions"]);
    assert_eq!(ok_as(&probe, &["get", "--raw", "/healthz"]).trim(), "ok");
}

#[test]
fn a_view_binding_opens_reads_in_its_namespace_only() {
    let (server, probe) = server_with_probe();
    server.kubectl_ok(&[
        "create",
        "configmap",
        "settings",
        "-n",
        "a",
        "--from-literal=k=v",
    ]);
    server.kubectl_ok(&[
        "create",
        "secret",
        "generic",
        "key",
        "-n",
        "a",
        "--from-literal=k=v",
    ]);
    refused_as(&probe, &["get", "pods", "-n", "a"]);
    grant_probe_view(&server);
    ok_as(&probe, &["get", "pods", "-n", "a"]);
    let cms = ok_as(&probe, &["get", "configmaps", "-n", "a", "-o", "name"]);
    assert_contains(&cms, "configmap/settings");
    let err = refused_as(&probe, &["get", "secrets", "-n", "a"]);
    assert_contains(
        &err,
        r#"User "system:serviceaccount:a:probe" cannot list resource "secrets" in API group "" in the namespace "a""#,
    );
    let err = refused_as(&probe, &["get", "pods", "-n", "default"]);
    assert_contains(&err, r#"in the namespace "default""#);
    let err = refused_as(&probe, &["delete", "configmap", "settings", "-n", "a"]);
    assert_contains(&err, r#"configmaps "settings" is forbidden"#);
}

#[test]
fn a_role_is_enforced_to_the_verb_and_the_name() {
    let (server, probe) = server_with_probe();
    for name in ["allowed", "other"] {
        server.kubectl_ok(&["create", "configmap", name, "-n", "a", "--from-literal=k=v"]);
    }
    server.kubectl_ok(&[
        "create",
        "role",
        "one-configmap",
        "--verb=get",
        "--resource=configmaps",
        "--resource-name=allowed",
        "-n",
        "a",
    ]);
    bind_account(&server, "probe-one", "--role=one-configmap", "a", "probe");
    ok_as(&probe, &["get", "configmap", "allowed", "-n", "a"]);
    let err = refused_as(&probe, &["get", "configmap", "other", "-n", "a"]);
    assert_contains(&err, r#"configmaps "other" is forbidden"#);
    refused_as(&probe, &["get", "configmaps", "-n", "a"]);
    refused_as(
        &probe,
        &["label", "configmap", "allowed", "-n", "a", "touched=yes"],
    );
}

#[test]
fn a_namespace_admin_cannot_grant_more_than_it_holds() {
    let server = Server::start();
    server.kubectl_ok(&["create", "namespace", "team"]);
    let boss = service_account(&server, "team", "boss");
    bind_account(&server, "boss-admin", "--clusterrole=admin", "team", "boss");
    ok_as(
        &boss,
        &[
            "create",
            "role",
            "readers",
            "--verb=get,list,watch",
            "--resource=pods,configmaps",
            "-n",
            "team",
        ],
    );
    ok_as(
        &boss,
        &[
            "create",
            "rolebinding",
            "readers",
            "--role=readers",
            "--serviceaccount=team:default",
            "-n",
            "team",
        ],
    );
    let err = refused_as(
        &boss,
        &[
            "create",
            "role",
            "everything",
            "--verb=*",
            "--resource=*.*",
            "-n",
            "team",
        ],
    );
    assert_contains(
        &err,
        "is attempting to grant RBAC permissions not currently held",
    );
    let err = refused_as(
        &boss,
        &[
            "create",
            "clusterrolebinding",
            "boss-everywhere",
            "--clusterrole=cluster-admin",
            "--serviceaccount=team:boss",
        ],
    );
    // kubectl's create generators print the server's message after
    // "failed to create …", without the "(Forbidden)" of other commands.
    assert_contains(
        &err,
        r#"clusterrolebindings.rbac.authorization.k8s.io is forbidden: User "system:serviceaccount:team:boss" cannot create resource "clusterrolebindings" in API group "rbac.authorization.k8s.io" at the cluster scope"#,
    );
    let err = refused_as(
        &boss,
        &[
            "create",
            "rolebinding",
            "boss-cluster-admin",
            "--clusterrole=cluster-admin",
            "--serviceaccount=team:boss",
            "-n",
            "team",
        ],
    );
    assert_contains(
        &err,
        r#"rolebindings.rbac.authorization.k8s.io "boss-cluster-admin" is forbidden: user "system:serviceaccount:team:boss" (groups=["system:serviceaccounts" "system:serviceaccounts:team" "system:authenticated"]) is attempting to grant RBAC permissions not currently held:"#,
    );
    // Its own namespace only.
    refused_as(&boss, &["get", "pods", "-n", "default"]);
}

#[test]
fn python_client_sees_the_refusal_and_the_grant() {
    let (server, probe) = server_with_probe();
    let run = |phase: &str| python_ok(&probe, "rbac.py", &[phase]);
    run("before");
    grant_probe_view(&server);
    run("after");
}

/// Binds service account `a/probe` to the `view` ClusterRole in namespace `a`.
fn grant_probe_view(server: &Server) {
    bind_account(server, "probe-view", "--clusterrole=view", "a", "probe");
}

/// A plain TCP listener on loopback that records every byte of the first
/// connection it accepts (for up to three seconds).
fn recording_listener() -> (u16, std::thread::JoinHandle<Vec<u8>>) {
    use std::io::Read;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    let recorder = std::thread::spawn(move || {
        listener.set_nonblocking(true).expect("nonblocking");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let mut stream = loop {
            match listener.accept() {
                Ok((stream, _)) => break stream,
                Err(_) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
                Err(_) => return Vec::new(),
            }
        };
        stream.set_nonblocking(false).expect("blocking");
        stream
            .set_read_timeout(Some(std::time::Duration::from_secs(3)))
            .expect("timeout");
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = stream.read(&mut buf) {
            if n == 0 {
                break;
            }
            seen.extend_from_slice(&buf[..n]);
        }
        seen
    });
    (port, recorder)
}

#[test]
fn a_fake_node_gets_nothing_usable() {
    let (server, probe) = server_with_probe();
    let dir = server.data_dir().to_path_buf();
    let (port, recorder) = recording_listener();
    let node = serde_json::json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "evil"},
        "status": {"addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
                   "daemonEndpoints": {"kubeletEndpoint": {"Port": port}}}});
    let node_file = dir.join("evil-node.json");
    std::fs::write(&node_file, node.to_string()).expect("write node");
    // Without grants the account cannot even make the Node.
    let err = refused_as(&probe, &["create", "-f", node_file.to_str().expect("path")]);
    assert_contains(
        &err,
        r#"cannot create resource "nodes" in API group "" at the cluster scope"#,
    );
    // Granted Nodes and pods (the worst case), it points a Node at its own
    // listener and binds a pod there.
    server.kubectl_ok(&[
        "create",
        "clusterrole",
        "node-maker",
        "--verb=create,get,update,patch",
        "--resource=nodes,nodes/status,pods",
    ]);
    server.kubectl_ok(&[
        "create",
        "clusterrolebinding",
        "probe-node-maker",
        "--clusterrole=node-maker",
        "--serviceaccount=a:probe",
    ]);
    ok_as(&probe, &["create", "-f", node_file.to_str().expect("path")]);
    let status = serde_json::json!({"status": node["status"]}).to_string();
    ok_as(
        &probe,
        &[
            "patch",
            "node",
            "evil",
            "--subresource=status",
            "--type=merge",
            "-p",
            &status,
        ],
    );
    let pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "bait", "namespace": "a"},
        "spec": {"nodeName": "evil", "containers": [{"name": "c", "image": "busybox"}]}});
    let pod_file = dir.join("bait-pod.json");
    std::fs::write(&pod_file, pod.to_string()).expect("write pod");
    ok_as(&probe, &["create", "-f", pod_file.to_str().expect("path")]);
    // The account cannot ask for the logs itself...
    let err = refused_as(&probe, &["logs", "bait", "-n", "a"]);
    assert_contains(&err, r#"cannot get resource "pods/log""#);
    // ...and when an administrator does, the listener gets a TLS hello the
    // API server abandons: no request, no header, no credential.
    let err = server.kubectl_err(&["logs", "bait", "-n", "a"]);
    assert_contains(&err, "Error from server");
    let seen = recorder.join().expect("recorder");
    assert_eq!(seen.first(), Some(&0x16), "not a TLS handshake: {seen:?}");
    let text = String::from_utf8_lossy(&seen);
    for leak in ["GET ", "Authorization", "Bearer", "/containerLogs"] {
        assert!(!text.contains(leak), "the listener saw {leak:?}: {text}");
    }
}

/// A PEM certificate request for user `cn` in groups `orgs`, and its key.
fn user_request(cn: &str, orgs: &[&str]) -> (String, String) {
    let key = rcgen::KeyPair::generate().expect("key");
    let mut params = rcgen::CertificateParams::default();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, cn);
    for o in orgs {
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, *o);
    }
    let request = params.serialize_request(&key).expect("request");
    (request.pem().expect("pem"), key.serialize_pem())
}

/// A CertificateSigningRequest `name` for the kube-apiserver-client signer.
fn client_csr(name: &str, request_pem: &str, usages: &str) -> String {
    use base64::Engine;
    let request = base64::engine::general_purpose::STANDARD.encode(request_pem);
    format!(
        r#"{{"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
            "metadata": {{"name": "{name}"}},
            "spec": {{"request": "{request}", "signerName": "kubernetes.io/kube-apiserver-client",
              "expirationSeconds": 3600, "usages": {usages}}}}}"#
    )
}

/// Upstream's way to give a user a certificate: a request, an approval by
/// an admin, the cluster's signature, and the certificate authenticates as
/// the user and groups it names. From the attacker's side: nobody may ask
/// for `system:masters`; one allowed to approve and write requests but not
/// for this signer can neither approve nor sign; wrong usages fail instead
/// of being signed.
#[test]
fn a_user_certificate_is_issued_only_through_an_approver_of_its_signer() {
    let (server, probe) = server_with_probe();
    let (request, key) = user_request("alice", &["dev"]);
    server.kubectl_stdin_ok(
        &["apply", "-f", "-"],
        &client_csr("alice", &request, r#"["client auth"]"#),
    );

    // Allowed to approve requests, but not for this signer: refused.
    server.kubectl_ok(&[
        "create",
        "clusterrole",
        "csr-approver",
        "--verb=get,list,update,patch",
        "--resource=certificatesigningrequests,certificatesigningrequests/approval,certificatesigningrequests/status",
    ]);
    server.kubectl_ok(&[
        "create",
        "clusterrolebinding",
        "probe-approves",
        "--clusterrole=csr-approver",
        "--serviceaccount=a:probe",
    ]);
    let err = refused_as(&probe, &["certificate", "approve", "alice"]);
    assert_contains(
        &err,
        r#"user not permitted to approve requests with signerName "kubernetes.io/kube-apiserver-client""#,
    );
    // ...nor may it write a certificate of its own making into the request.
    let err = refused_as(
        &probe,
        &[
            "patch",
            "csr",
            "alice",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status": {"certificate": "bWluZQ=="}}"#,
        ],
    );
    assert_contains(
        &err,
        r#"user not permitted to sign requests with signerName "kubernetes.io/kube-apiserver-client""#,
    );

    // The admin approves; the signer issues; the certificate is alice's.
    server.kubectl_ok(&["certificate", "approve", "alice"]);
    let certificate = super::support::eventually(
        std::time::Duration::from_secs(30),
        "alice's certificate",
        || {
            let pem = server.kubectl_ok(&[
                "get",
                "csr",
                "alice",
                "-o",
                "jsonpath={.status.certificate}",
            ]);
            (!pem.is_empty()).then_some(pem)
        },
    );
    assert_contains(
        &server.kubectl_ok(&["get", "csr", "alice"]),
        "Approved,Issued",
    );
    use base64::Engine;
    let certificate = base64::engine::general_purpose::STANDARD
        .decode(certificate.trim())
        .expect("base64");
    let dir = server.data_dir();
    std::fs::write(dir.join("alice.crt"), certificate).expect("write");
    std::fs::write(dir.join("alice.key"), key).expect("write");
    let kubeconfig = dir.join("alice.kubeconfig");
    std::fs::copy(server.kubeconfig(), &kubeconfig).expect("copy");
    let alice = Kubectl::new(&kubeconfig);
    alice.ok(&[
        "config",
        "set-credentials",
        "alice",
        &format!("--client-certificate={}", dir.join("alice.crt").display()),
        &format!("--client-key={}", dir.join("alice.key").display()),
    ]);
    alice.ok(&["config", "set-context", "--current", "--user=alice"]);
    let who = alice.ok(&["auth", "whoami", "-o", "jsonpath={.status.userInfo}"]);
    assert_contains(&who, r#""username":"alice""#);
    assert_contains(&who, r#""dev""#);
    let err = alice.err(&["get", "secrets", "-A"]);
    assert_contains(&err, r#"User "alice" cannot list resource "secrets""#);

    // Nobody may ask this signer for the cluster admins' group.
    let (masters, _) = user_request("mallory", &["system:masters"]);
    let out = server.kubectl_stdin(
        &["apply", "-f", "-"],
        &client_csr("mallory", &masters, r#"["client auth"]"#),
    );
    assert!(!out.status.success());
    assert_contains(
        &String::from_utf8_lossy(&out.stderr),
        "use of kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed",
    );

    // A request for server usages is not signed, even approved.
    let (request, _) = user_request("bob", &["dev"]);
    server.kubectl_stdin_ok(
        &["apply", "-f", "-"],
        &client_csr("bob", &request, r#"["client auth", "server auth"]"#),
    );
    server.kubectl_ok(&["certificate", "approve", "bob"]);
    let failed = super::support::eventually(
        std::time::Duration::from_secs(30),
        "bob's request failed",
        || {
            let out = server.kubectl_ok(&["get", "csr", "bob"]);
            out.contains("Failed").then_some(out)
        },
    );
    assert_contains(&failed, "Approved,Failed");
    let message = server.kubectl_ok(&[
        "get",
        "csr",
        "bob",
        "-o",
        r#"jsonpath={.status.conditions[?(@.type=="Failed")].message}"#,
    ]);
    assert_contains(
        &message,
        "invalid usage for client certificate: server auth",
    );
}
