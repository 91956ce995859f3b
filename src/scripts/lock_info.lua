-- One lock's state as one master shows it (redlock_lock_info).  KEYS[1]: the key.
-- Replies: "" when no lock is there, else "PTTL LEN VALUE" and the holder record.

@include lock_state
return info
