//! Protobuf wire format: varints, field keys, and the `runtime.Unknown`
//! envelope around every Kubernetes protobuf object.

use super::ProtobufError;

/// One field as read from the wire.
pub enum Field<'a> {
    Varint(u64),
    Fixed64(u64),
    Bytes(&'a [u8]),
    /// A 32-bit value (no Kubernetes field uses one; skipped).
    Fixed32,
}

/// Iterates `(field number, value)` over a message's bytes.
pub struct Reader<'a> {
    data: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Self { data }
    }

    fn varint(&mut self) -> Result<u64, ProtobufError> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = self
                .data
                .split_first()
                .ok_or_else(|| malformed("truncated varint"))?;
            self.data = rest;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(malformed("varint too long"))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], ProtobufError> {
        if self.data.len() < n {
            return Err(malformed("truncated field"));
        }
        let (head, rest) = self.data.split_at(n);
        self.data = rest;
        Ok(head)
    }

    /// The next field, or `None` at the end.
    pub fn next_field(&mut self) -> Result<Option<(u64, Field<'a>)>, ProtobufError> {
        if self.data.is_empty() {
            return Ok(None);
        }
        let key = self.varint()?;
        let number = key >> 3;
        let value = match key & 7 {
            0 => Field::Varint(self.varint()?),
            1 => Field::Fixed64(u64::from_le_bytes(
                self.take(8)?.try_into().map_err(|_| malformed("fixed64"))?,
            )),
            2 => {
                let len =
                    usize::try_from(self.varint()?).map_err(|_| malformed("length overflows"))?;
                Field::Bytes(self.take(len)?)
            }
            5 => {
                self.take(4)?;
                Field::Fixed32
            }
            other => return Err(malformed(&format!("unsupported wire type {other}"))),
        };
        Ok(Some((number, value)))
    }
}

pub fn malformed(what: &str) -> ProtobufError {
    ProtobufError::Malformed(what.to_string())
}

/// The decoded `runtime.Unknown` envelope.
pub struct Envelope<'a> {
    pub api_version: String,
    pub kind: String,
    pub raw: &'a [u8],
}

fn utf8(bytes: &[u8]) -> Result<String, ProtobufError> {
    String::from_utf8(bytes.to_vec()).map_err(|_| malformed("string is not UTF-8"))
}

impl<'a> Envelope<'a> {
    pub fn parse(data: &'a [u8]) -> Result<Self, ProtobufError> {
        let mut envelope = Envelope {
            api_version: String::new(),
            kind: String::new(),
            raw: &[],
        };
        let mut reader = Reader::new(data);
        while let Some((number, value)) = reader.next_field()? {
            match (number, value) {
                (1, Field::Bytes(type_meta)) => {
                    let mut inner = Reader::new(type_meta);
                    while let Some((n, v)) = inner.next_field()? {
                        match (n, v) {
                            (1, Field::Bytes(b)) => envelope.api_version = utf8(b)?,
                            (2, Field::Bytes(b)) => envelope.kind = utf8(b)?,
                            _ => {}
                        }
                    }
                }
                (2, Field::Bytes(raw)) => envelope.raw = raw,
                (4, Field::Bytes(content_type)) if !content_type.is_empty() => {
                    return Err(malformed("only unencoded protobuf objects are supported"));
                }
                _ => {}
            }
        }
        Ok(envelope)
    }
}

/// Encodes a varint (for tests that build messages by hand).
#[cfg(test)]
pub fn varint_bytes(mut value: u64) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return out;
        }
        out.push(byte | 0x80);
    }
}
