ALTER TABLE events DROP COLUMN filtered_out;
ALTER TABLE events DROP COLUMN metadata;
ALTER TABLE endpoints DROP COLUMN filter;
