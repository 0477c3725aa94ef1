//! Running a host command to completion (`nft`, `ip`, `bridge`): optional
//! standard input, captured output, and an error that names the command
//! line, so a failed network sync says which call failed and what the tool
//! printed. Blocking: async callers run it on a blocking thread.

use std::io::Write as _;
use std::process::{Command, Stdio};

/// A host command that did not start or did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// The command could not be started (or its pipes failed).
    #[error("running {command}: {source}")]
    Spawn {
        /// The command line.
        command: String,
        /// Why it did not start.
        source: std::io::Error,
    },
    /// The command ran and exited unsuccessfully.
    #[error("{command} failed ({status}): {stderr}")]
    Failed {
        /// The command line.
        command: String,
        /// Its exit status.
        status: std::process::ExitStatus,
        /// Its error output, trimmed.
        stderr: String,
    },
}

/// Runs `words[0]` with the rest as arguments, feeding `input` to its
/// standard input (none: `/dev/null`), and returns its standard output.
///
/// A write to standard input that fails is not reported by itself: it means
/// the command exited early, and its exit status says why.
pub fn run(words: &[&str], input: Option<&str>) -> Result<String, CommandError> {
    let line = words.join(" ");
    let spawn_err = |source| CommandError::Spawn {
        command: line.clone(),
        source,
    };
    let (program, args) = words.split_first().ok_or_else(|| {
        spawn_err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "no program named",
        ))
    })?;
    let mut child = Command::new(program)
        .args(args)
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(spawn_err)?;
    if let (Some(input), Some(mut stdin)) = (input, child.stdin.take()) {
        let _ = stdin.write_all(input.as_bytes());
    }
    let output = child.wait_with_output().map_err(spawn_err)?;
    if !output.status.success() {
        return Err(CommandError::Failed {
            command: line,
            status: output.status,
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_and_input_pass_through() {
        assert_eq!(run(&["cat"], Some("hello")).unwrap(), "hello");
        assert_eq!(run(&["echo", "a", "b"], None).unwrap(), "a b\n");
    }

    #[test]
    fn a_failure_names_the_command_and_its_error_output() {
        let err = run(&["sh", "-c", "echo nope >&2; exit 3"], None).unwrap_err();
        let CommandError::Failed {
            command, stderr, ..
        } = &err
        else {
            panic!("not a failure: {err:?}");
        };
        assert_eq!(command, "sh -c echo nope >&2; exit 3");
        assert_eq!(stderr, "nope");
        assert!(err.to_string().contains("exit status: 3"), "{err}");
    }

    #[test]
    fn a_missing_program_is_a_spawn_error() {
        let err = run(&["/nonexistent/skiff-no-such-tool", "x"], None).unwrap_err();
        assert!(
            matches!(&err, CommandError::Spawn { command, .. } if command == "/nonexistent/skiff-no-such-tool x"),
            "{err:?}"
        );
        assert!(matches!(run(&[], None), Err(CommandError::Spawn { .. })));
    }
}
