//! `stats conns`: the state memcached names for each connection.

use std::collections::BTreeMap;
use std::io::Read;

use crate::common::Server;

/// `stats conns` names what each client connection waits for, as memcached's
/// connection states: a connection that has sent nothing a new command; one that
/// was served, or holds part of a line or of a binary header, extras and key, a
/// read; a value after its line (text) or after its header, extras and key
/// (binary), `conn_nread`; a refused value being discarded, `conn_swallow`; the
/// asking connection is parsing. Each connection's state shows once the server has
/// read its bytes, so the check asks again (bounded) until every one is there.
#[test]
fn stats_conns_names_connection_states() {
    use std::io::Write;
    use std::net::TcpStream;
    let s = Server::tcp(&[]);
    let open = |bytes: &[u8]| {
        let mut t = TcpStream::connect(("127.0.0.1", s.port())).expect("connect");
        t.write_all(bytes).expect("write");
        t
    };
    let mut served = open(b"version\r\n");
    let mut line = Vec::new();
    while !line.ends_with(b"\r\n") {
        let mut b = [0u8; 1];
        served.read_exact(&mut b).expect("version reply");
        line.push(b[0]);
    }
    // A binary SET of key `foo` with 8 bytes of extras and a 5-byte value.
    let mut bin_set = vec![0x80, 0x01, 0x00, 0x03, 0x08, 0x00, 0x00, 0x00];
    bin_set.extend_from_slice(&16u32.to_be_bytes());
    bin_set.extend_from_slice(&[0; 12]);
    let conns = [
        (open(b""), "conn_new_cmd"),
        (served, "conn_read"),
        (open(b"get fo"), "conn_read"),
        (open(&bin_set[..24]), "conn_read"),
        (open(b"set foo 0 0 6\r\nab"), "conn_nread"),
        (
            open(&[&bin_set[..], &[0; 8], b"foo", b"ab"].concat()),
            "conn_nread",
        ),
        (open(b"set foo 0 0 2000000\r\nab"), "conn_swallow"),
    ];
    let want: BTreeMap<String, &str> = conns
        .iter()
        .map(|(t, st)| {
            let a = t.local_addr().expect("local address");
            (format!("tcp:{a}"), *st)
        })
        .collect();
    let mut c = s.connect();
    let mut got = BTreeMap::new();
    for _ in 0..200 {
        // fd -> (addr, state)
        let mut by_fd: BTreeMap<String, (String, String)> = BTreeMap::new();
        for (key, v) in c.stats_list("conns") {
            let Some((fd, field)) = key.split_once(':') else {
                continue;
            };
            let e = by_fd.entry(fd.to_string()).or_default();
            match field {
                "addr" => e.0 = v,
                "state" => e.1 = v,
                _ => {}
            }
        }
        got = by_fd
            .values()
            .filter(|(a, _)| want.contains_key(a))
            .map(|(a, st)| (a.clone(), st.clone()))
            .collect();
        let parsing = by_fd
            .values()
            .filter(|(_, st)| st == "conn_parse_cmd")
            .count();
        if want
            .iter()
            .all(|(a, st)| got.get(a).is_some_and(|g| g == st))
            && parsing == 1
        {
            drop(conns);
            return;
        }
    }
    panic!("stats conns states: want {want:?}, got {got:?}");
}
