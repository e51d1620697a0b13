DROP TABLE operational_sequences;
