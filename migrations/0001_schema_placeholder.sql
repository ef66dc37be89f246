-- placeholder, replaced by the store work
CREATE TABLE IF NOT EXISTS allot_placeholder (id INTEGER PRIMARY KEY);
