//! The nodes of a cluster in one URI. An AMQP URI names one host; a cluster's clients are given
//! several, and connect to the first that answers. inboxed takes them in the form libpq and the
//! PostgreSQL store take: hosts separated by commas where the one host would be
//! (`amqp://app:secret@rabbit1:5672,rabbit2:5672,rabbit3:5672/%2f?heartbeat=10`), every other
//! part shared. A consumer or publisher whose node goes away reconnects to the first node of
//! the list that answers, so a quorum queue's consumers carry on on another node when theirs
//! is stopped.

/// One URI per node of `uri`, in its order; `uri` itself when it names one host (or cannot be
/// split: lapin's parser then says what is wrong with it).
pub(crate) fn split(uri: &str) -> Vec<String> {
    let Some((scheme, rest)) = uri.split_once("://") else {
        return vec![uri.to_owned()];
    };
    let (authority, tail) = match rest.find(['/', '?']) {
        Some(at) => rest.split_at(at),
        None => (rest, ""),
    };
    let (userinfo, hosts) = match authority.rsplit_once('@') {
        Some((user, hosts)) => (Some(user), hosts),
        None => (None, authority),
    };
    let nodes: Vec<String> = hosts
        .split(',')
        .filter(|h| !h.is_empty())
        .map(|host| match userinfo {
            Some(user) => format!("{scheme}://{user}@{host}{tail}"),
            None => format!("{scheme}://{host}{tail}"),
        })
        .collect();
    if nodes.len() > 1 {
        nodes
    } else {
        vec![uri.to_owned()]
    }
}

#[cfg(test)]
mod tests {
    use super::split;

    #[test]
    fn a_cluster_uri_is_one_uri_per_node() {
        assert_eq!(
            split("amqp://app:s,e@r1:5672,r2:5673/%2f?heartbeat=10"),
            [
                "amqp://app:s,e@r1:5672/%2f?heartbeat=10",
                "amqp://app:s,e@r2:5673/%2f?heartbeat=10"
            ]
        );
        assert_eq!(split("amqps://r1,r2"), ["amqps://r1", "amqps://r2"]);
        for one in [
            "amqp://guest:guest@127.0.0.1:5672/%2f",
            "amqp://r1/",
            "not a uri",
        ] {
            assert_eq!(split(one), [one]);
        }
    }
}
