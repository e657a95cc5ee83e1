//! Reading a response body with a ceiling: a provider (or anything at the configured address) that sends an
//! endless body must not take the process's memory with it.

/// The body as text, at most `limit` bytes of it; the flag says whether more was sent (the rest is not read).
pub async fn read_capped(mut response: reqwest::Response, limit: usize) -> Result<(String, bool), reqwest::Error> {
    let mut bytes: Vec<u8> = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        let room = limit.saturating_sub(bytes.len());
        if chunk.len() > room {
            bytes.extend_from_slice(&chunk[..room]);
            return Ok((String::from_utf8_lossy(&bytes).into_owned(), true));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok((String::from_utf8_lossy(&bytes).into_owned(), false))
}
