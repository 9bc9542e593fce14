-- Which erased rows were derived rows (issue 28, found by the crash drill): the memory step records the derived
-- ids in the request record after its deleting transaction commits; a worker killed in between lost them (the
-- receipt's derived_rows_removed came out empty while another user's derived summary was gone). The flag is
-- written in the deleting transaction, so a retry reads the derived ids back from here.
ALTER TABLE erased_memories ADD COLUMN IF NOT EXISTS derived boolean NOT NULL DEFAULT false;
CREATE INDEX IF NOT EXISTS erased_memories_request ON erased_memories (request_id) WHERE derived;
