"""``proofbot audit stream``: the audit log, event by event, to a SIEM (an HTTP webhook, RFC 5424 syslog),
resuming from the last acknowledged ``seq``."""
