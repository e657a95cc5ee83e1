//! Reads a `multipart/form-data` body (what `sendDocument` and `sendPhoto` upload) into its parts, by hand: the
//! boundary comes from the Content-Type header, each part's name and file name from its Content-Disposition.

/// One field of the form: text when `filename` is `None`, else an uploaded file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    pub name: String,
    pub filename: Option<String>,
    pub data: Vec<u8>,
}

/// The parts of `body`, or what is wrong with it.
pub fn parse(content_type: &str, body: &[u8]) -> Result<Vec<Part>, String> {
    let boundary = header_param(content_type, "boundary").ok_or("the Content-Type has no boundary")?;
    let delimiter = format!("--{boundary}").into_bytes();
    let closing = [b"\r\n".as_slice(), &delimiter].concat();
    let mut pos = find(body, &delimiter, 0).ok_or("the body has no boundary")? + delimiter.len();
    let mut parts = Vec::new();
    loop {
        if body[pos..].starts_with(b"--") {
            return Ok(parts);
        }
        if body[pos..].starts_with(b"\r\n") {
            pos += 2;
        }
        let headers_end = find(body, b"\r\n\r\n", pos).ok_or("a part has no end of headers")?;
        let headers = String::from_utf8_lossy(&body[pos..headers_end]).into_owned();
        let data_start = headers_end + 4;
        let data_end = find(body, &closing, data_start).ok_or("a part is not closed by the boundary")?;
        let disposition = headers
            .split("\r\n")
            .find_map(|line| {
                let (key, value) = line.split_once(':')?;
                key.trim().eq_ignore_ascii_case("content-disposition").then(|| value.trim().to_string())
            })
            .ok_or("a part has no Content-Disposition")?;
        let name = header_param(&disposition, "name").ok_or("a part has no name")?;
        let filename = header_param(&disposition, "filename*")
            .map(|encoded| {
                let value = encoded.split_once("''").map_or(encoded.as_str(), |(_, v)| v);
                percent_decode(value)
            })
            .or_else(|| header_param(&disposition, "filename").map(|f| percent_decode(&f)));
        parts.push(Part { name, filename, data: body[data_start..data_end].to_vec() });
        pos = data_end + closing.len();
    }
}

/// `key=value` or `key="value"` among the `;`-separated parameters of a header value.
fn header_param(value: &str, key: &str) -> Option<String> {
    value.split(';').skip(1).find_map(|param| {
        let (k, v) = param.split_once('=')?;
        if !k.trim().eq_ignore_ascii_case(key) {
            return None;
        }
        let v = v.trim();
        let unquoted = v.strip_prefix('"').and_then(|v| v.strip_suffix('"')).unwrap_or(v);
        Some(unquoted.replace("\\\"", "\"").replace("\\\\", "\\"))
    })
}

fn find(haystack: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    if needle.is_empty() || from > haystack.len() {
        return None;
    }
    haystack[from..].windows(needle.len()).position(|w| w == needle).map(|p| p + from)
}

/// `%XX` sequences to bytes (clients may encode file names); anything else is kept.
pub fn percent_decode(text: &str) -> String {
    percent_encoding::percent_decode_str(text).decode_utf8_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_fields_and_a_file_are_read() {
        let body = b"--XyZ\r\nContent-Disposition: form-data; name=\"chat_id\"\r\n\r\n12\r\n--XyZ\r\n\
Content-Disposition: form-data; name=\"document\"; filename=\"notes.txt\"\r\nContent-Type: text/plain\r\n\r\n\
line one\r\nline two\r\n--XyZ--\r\n";
        let parts = parse("multipart/form-data; boundary=XyZ", body).unwrap();
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0], Part { name: "chat_id".into(), filename: None, data: b"12".to_vec() });
        assert_eq!(parts[1].name, "document");
        assert_eq!(parts[1].filename.as_deref(), Some("notes.txt"));
        assert_eq!(parts[1].data, b"line one\r\nline two");
    }

    #[test]
    fn a_quoted_boundary_and_an_encoded_file_name_are_understood() {
        let body = b"--a b\r\nContent-Disposition: form-data; name=\"photo\"; filename=\"caf%C3%A9.png\"\r\n\r\n\
\x00\x01\r\n--a b--";
        let parts = parse("multipart/form-data; boundary=\"a b\"", body).unwrap();
        assert_eq!(parts[0].filename.as_deref(), Some("café.png"));
        assert_eq!(parts[0].data, [0, 1]);
    }

    #[test]
    fn a_body_without_its_boundary_is_refused() {
        assert!(parse("multipart/form-data; boundary=q", b"nothing here").is_err());
        assert!(parse("multipart/form-data", b"--q\r\n").is_err());
    }
}
