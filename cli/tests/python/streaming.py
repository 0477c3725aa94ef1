"""The Python client's streaming calls against a real pod: exec over
WebSocket (v4.channel.k8s.io) with output, stdin and the exit code, and
port-forward to the pod's httpd. Usage: streaming.py NAMESPACE POD PORT."""

import sys

from kubernetes import client, config
from kubernetes.stream import portforward, stream


def main():
    namespace, pod, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    config.load_kube_config()
    core = client.CoreV1Api()

    def exec_shell(script, **options):
        """Runs `sh -c script` in the pod, its output and errors attached."""
        return stream(
            core.connect_get_namespaced_pod_exec,
            pod,
            namespace,
            command=["sh", "-c", script],
            stderr=True,
            stdout=True,
            tty=False,
            **options,
        )

    out = exec_shell("echo from-python-exec", stdin=False)
    assert out == "from-python-exec\n", repr(out)

    session = exec_shell(
        "read line; echo got:$line; echo oops >&2; exit 4",
        stdin=True,
        _preload_content=False,
    )
    session.write_stdin("hello\n")
    session.run_forever(timeout=30)
    stdout = session.read_stdout()
    stderr = session.read_stderr()
    assert stdout == "got:hello\n", repr(stdout)
    assert stderr == "oops\n", repr(stderr)
    assert session.returncode == 4, session.returncode
    session.close()

    forward = portforward(
        core.connect_get_namespaced_pod_portforward,
        pod,
        namespace,
        ports=str(port),
    )
    sock = forward.socket(port)
    sock.setblocking(True)
    sock.sendall(b"GET /index.html HTTP/1.0\r\nHost: pod\r\n\r\n")
    reply = b""
    while True:
        chunk = sock.recv(4096)
        if not chunk:
            break
        reply += chunk
    sock.close()
    assert b"200 OK" in reply and b"hello-from-httpd" in reply, reply
    error = forward.error(port)
    assert error is None, error
    forward.close()
    print("python streaming ok")


if __name__ == "__main__":
    main()
