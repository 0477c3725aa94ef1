//! The snapshot file: a magic and version, the header (revision, creation
//! time, counts), the attachments, the entries, then the SHA-256 of all that.
//! Integers are big endian; lengths precede what they measure. Reading
//! checks the digest over the whole file first, so a truncated or altered
//! file is refused as a whole, and then decodes with every length checked
//! against what is left.

use std::fs;
use std::io::{BufWriter, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use bytes::Bytes;
use sha2::{Digest, Sha256};

use super::{Attachment, Snapshot, SnapshotError, io};
use crate::KeyValue;

const MAGIC: &[u8; 10] = b"SKIFFSNAP\n";
const VERSION: u32 = 1;
const DIGEST: usize = 32;

/// A writer that hashes what it passes on.
struct Hashing<W> {
    inner: W,
    digest: Sha256,
}

impl<W: Write> Hashing<W> {
    fn put(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.digest.update(bytes);
        self.inner.write_all(bytes)
    }

    fn put_u32(&mut self, n: u32) -> std::io::Result<()> {
        self.put(&n.to_be_bytes())
    }

    fn put_u64(&mut self, n: u64) -> std::io::Result<()> {
        self.put(&n.to_be_bytes())
    }

    fn put_bytes(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.put_u64(bytes.len() as u64)?;
        self.put(bytes)
    }
}

fn encode<W: Write>(snapshot: &Snapshot, out: &mut Hashing<W>) -> std::io::Result<()> {
    out.put(MAGIC)?;
    out.put_u32(VERSION)?;
    out.put_u64(snapshot.revision)?;
    out.put_u64(snapshot.created)?;
    out.put_u64(snapshot.attachments.len() as u64)?;
    out.put_u64(snapshot.entries.len() as u64)?;
    for attachment in &snapshot.attachments {
        out.put_bytes(attachment.name.as_bytes())?;
        out.put_bytes(&attachment.data)?;
    }
    for kv in &snapshot.entries {
        out.put_bytes(kv.key.as_bytes())?;
        out.put_u64(kv.create_revision)?;
        out.put_u64(kv.mod_revision)?;
        out.put_u64(kv.version)?;
        out.put_bytes(&kv.value)?;
    }
    Ok(())
}

/// The whole file's bytes (for the fuzz target's round trip).
pub(crate) fn to_bytes(snapshot: &Snapshot) -> Vec<u8> {
    let mut out = Hashing {
        inner: Vec::new(),
        digest: Sha256::new(),
    };
    // Writing to a Vec cannot fail.
    let _ = encode(snapshot, &mut out);
    let digest = out.digest.finalize();
    let mut bytes = out.inner;
    bytes.extend_from_slice(&digest);
    bytes
}

/// `body` with its digest appended, as a file would end (for the fuzz
/// target, which could never guess a digest).
pub(crate) fn seal(body: &[u8]) -> Vec<u8> {
    let mut bytes = body.to_vec();
    bytes.extend_from_slice(&Sha256::digest(body));
    bytes
}

pub(super) fn write(snapshot: &Snapshot, path: &Path) -> Result<u64, SnapshotError> {
    let name = path.file_name().ok_or_else(|| SnapshotError::Io {
        action: "write a snapshot to",
        path: path.to_owned(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "no file name"),
    })?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(".tmp");
    let tmp = path.with_file_name(tmp_name);
    let _ = fs::remove_file(&tmp);
    // The snapshot holds every Secret and the CA key: owner-only from the
    // first byte, not chmod-ed afterwards.
    let file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(io("create", &tmp))?;
    let mut out = Hashing {
        inner: BufWriter::new(file),
        digest: Sha256::new(),
    };
    let written = encode(snapshot, &mut out)
        .and_then(|()| {
            let digest = out.digest.clone().finalize();
            out.inner.write_all(&digest)?;
            out.inner.flush()?;
            out.inner.get_ref().sync_all()?;
            out.inner.get_ref().metadata().map(|m| m.len())
        })
        .map_err(io("write", &tmp));
    let written = match written {
        Ok(len) => len,
        Err(err) => {
            let _ = fs::remove_file(&tmp);
            return Err(err);
        }
    };
    if let Err(err) = fs::rename(&tmp, path) {
        let _ = fs::remove_file(&tmp);
        return Err(io("move a snapshot into", path)(err));
    }
    if let Some(parent) = path.parent() {
        let parent = if parent.as_os_str().is_empty() {
            Path::new(".")
        } else {
            parent
        };
        fs::File::open(parent)
            .and_then(|d| d.sync_all())
            .map_err(io("sync the directory", parent))?;
    }
    Ok(written)
}

/// A cursor over the checked bytes of a snapshot.
struct Reader<'a> {
    raw: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: u64, what: &str) -> Result<&'a [u8], String> {
        let left = (self.raw.len() - self.at) as u64;
        if n > left {
            return Err(format!(
                "{what} needs {n} bytes at offset {}, only {left} left",
                self.at
            ));
        }
        let start = self.at;
        self.at += n as usize;
        Ok(&self.raw[start..self.at])
    }

    fn u32(&mut self, what: &str) -> Result<u32, String> {
        let raw = self.take(4, what)?;
        Ok(u32::from_be_bytes([raw[0], raw[1], raw[2], raw[3]]))
    }

    fn u64(&mut self, what: &str) -> Result<u64, String> {
        let raw = self.take(8, what)?;
        let mut buf = [0u8; 8];
        buf.copy_from_slice(raw);
        Ok(u64::from_be_bytes(buf))
    }

    fn bytes(&mut self, what: &str) -> Result<&'a [u8], String> {
        let len = self.u64(what)?;
        self.take(len, what)
    }

    fn string(&mut self, what: &str) -> Result<String, String> {
        let raw = self.bytes(what)?;
        String::from_utf8(raw.to_vec()).map_err(|e| format!("{what} is not UTF-8: {e}"))
    }
}

pub(super) fn read(path: &Path) -> Result<Snapshot, SnapshotError> {
    let raw = fs::read(path).map_err(io("read", path))?;
    decode(&raw).map_err(|detail| SnapshotError::Corrupt {
        path: path.to_owned(),
        detail,
    })
}

pub(crate) fn decode(raw: &[u8]) -> Result<Snapshot, String> {
    if raw.len() < MAGIC.len() || &raw[..MAGIC.len()] != MAGIC {
        return Err("it does not start like a skiff snapshot".into());
    }
    if raw.len() < MAGIC.len() + 4 + DIGEST {
        return Err(format!("only {} bytes: truncated", raw.len()));
    }
    let (body, digest) = raw.split_at(raw.len() - DIGEST);
    if Sha256::digest(body).as_slice() != digest {
        return Err("checksum mismatch: the file is damaged or truncated".into());
    }
    let mut r = Reader {
        raw: body,
        at: MAGIC.len(),
    };
    let version = r.u32("the format version")?;
    if version != VERSION {
        return Err(format!(
            "format version {version}, this skiff reads {VERSION}"
        ));
    }
    let revision = r.u64("the revision")?;
    let created = r.u64("the creation time")?;
    let attachments = r.u64("the attachment count")?;
    let entries = r.u64("the entry count")?;
    // Counts come from a checksummed file, but a file made to pass the
    // checksum must still not make us reserve unbounded memory up front.
    let cap = |n: u64| n.min(1 << 16) as usize;
    let mut snapshot = Snapshot {
        revision,
        created,
        entries: Vec::with_capacity(cap(entries)),
        attachments: Vec::with_capacity(cap(attachments)),
    };
    for _ in 0..attachments {
        let name = r.string("an attachment name")?;
        let data = r.bytes("an attachment")?.to_vec();
        snapshot.attachments.push(Attachment { name, data });
    }
    let mut previous: Option<String> = None;
    for _ in 0..entries {
        let key = r.string("a key")?;
        let create_revision = r.u64("a create revision")?;
        let mod_revision = r.u64("a mod revision")?;
        let version = r.u64("a version")?;
        let value = Bytes::copy_from_slice(r.bytes("a value")?);
        if mod_revision > revision || create_revision > mod_revision || version == 0 {
            return Err(format!(
                "key {key:?} has revisions (create {create_revision}, mod {mod_revision}, version {version}) that do not fit the snapshot's revision {revision}"
            ));
        }
        if previous.as_deref().is_some_and(|p| p >= key.as_str()) {
            return Err(format!("key {key:?} is out of order"));
        }
        previous = Some(key.clone());
        snapshot.entries.push(KeyValue {
            key,
            value,
            create_revision,
            mod_revision,
            version,
        });
    }
    if r.at != body.len() {
        return Err(format!("{} bytes after the last entry", body.len() - r.at));
    }
    Ok(snapshot)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Snapshot {
        Snapshot {
            revision: 9,
            created: 1_700_000_000,
            entries: vec![
                KeyValue {
                    key: "/a".into(),
                    value: Bytes::from_static(b"one"),
                    create_revision: 2,
                    mod_revision: 5,
                    version: 2,
                },
                KeyValue {
                    key: "/b".into(),
                    value: Bytes::new(),
                    create_revision: 9,
                    mod_revision: 9,
                    version: 1,
                },
            ],
            attachments: vec![Attachment {
                name: "tls/ca.key".into(),
                data: b"secret".to_vec(),
            }],
        }
    }

    #[test]
    fn a_snapshot_reads_back_and_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("snap");
        let size = write(&sample(), &path).unwrap();
        assert_eq!(size, fs::metadata(&path).unwrap().len());
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(read(&path).unwrap(), sample());
        // No temporary file is left next to it.
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn the_encoding_is_canonical() {
        let file = to_bytes(&sample());
        let body = &file[..file.len() - DIGEST];
        assert_eq!(seal(body), file);
        assert_eq!(to_bytes(&decode(&file).unwrap()), file);
        // Trailing bytes behind the last entry are refused, not ignored.
        let mut longer = body.to_vec();
        longer.push(0);
        assert!(
            decode(&seal(&longer))
                .unwrap_err()
                .contains("after the last entry")
        );
    }

    #[test]
    fn every_truncation_and_every_flipped_byte_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("snap");
        write(&sample(), &path).unwrap();
        let raw = fs::read(&path).unwrap();
        for len in 0..raw.len() {
            assert!(decode(&raw[..len]).is_err(), "truncated to {len} accepted");
        }
        for at in 0..raw.len() {
            let mut bad = raw.clone();
            bad[at] ^= 0x40;
            assert!(decode(&bad).is_err(), "byte {at} flipped accepted");
        }
        let err = read(&{
            let p = dir.path().join("cut");
            fs::write(&p, &raw[..raw.len() - 7]).unwrap();
            p
        })
        .unwrap_err();
        assert!(err.to_string().contains("checksum mismatch"), "{err}");
    }
}
