// The RFC 4180 reader: quotes, line ends, BOM, and errors naming the line.
#include <gtest/gtest.h>

#include "convoy/records/csv.h"
#include "test_helpers.h"
#include "test_records_helpers.h"

namespace convoy::records {
namespace {

using convoy::testing::error_of;
using convoy::testing::TempDir;

using Rows = std::vector<std::vector<std::string>>;

Rows fields(std::string_view text) {
  Rows out;
  for (CsvRecord& r : parse_csv(text, "t.csv")) out.push_back(std::move(r.fields));
  return out;
}

std::vector<int64_t> lines(std::string_view text) {
  std::vector<int64_t> out;
  for (const CsvRecord& r : parse_csv(text, "t.csv")) out.push_back(r.line);
  return out;
}

}  // namespace

TEST(Csv, SplitsFieldsAndAcceptsEveryLineEnd) {
  const Rows want = {{"a", "b", "c"}, {"1", "", "3"}};
  EXPECT_EQ(fields("a,b,c\n1,,3\n"), want);
  EXPECT_EQ(fields("a,b,c\r\n1,,3\r\n"), want);
  EXPECT_EQ(fields("a,b,c\r1,,3"), want);  // old Mac line ends, no final newline
  EXPECT_EQ(fields("a,b,c\n1,,3"), want);
  EXPECT_EQ(fields("a,\n"), (Rows{{"a", ""}}));
  EXPECT_EQ(fields(""), Rows{});
}

TEST(Csv, QuotedFieldsHoldCommasQuotesAndLineBreaks) {
  EXPECT_EQ(fields("\"a,b\",\"say \"\"hi\"\"\",\"\"\n"), (Rows{{"a,b", "say \"hi\"", ""}}));
  EXPECT_EQ(fields("\"two\r\nlines\",x\r\ny,z\r\n"), (Rows{{"two\r\nlines", "x"}, {"y", "z"}}));
  EXPECT_EQ(lines("\"two\nlines\",x\ny,z\n"), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(fields("ab\"c,d\n"), (Rows{{"ab\"c", "d"}}));  // a quote inside an unquoted field is data
}

// What convoy writes reads back field for field: a file name with a comma
// split a predictions.csv row in two.
TEST(Csv, AWrittenFieldReadsBackAsItWas) {
  const std::vector<std::string> values = {"plain", "a,b.jpg", "say \"hi\"", "two\nlines", "cr\rhere", "", " spaced "};
  std::string row;
  for (const std::string& v : values) row += (row.empty() ? "" : ",") + records::csv_field(v);
  EXPECT_EQ(fields(row + "\n"), Rows{values});
  EXPECT_EQ(records::csv_field("plain"), "plain");  // unquoted when nothing needs it
  EXPECT_EQ(records::csv_field("a\"b"), "\"a\"\"b\"");
}

TEST(Csv, DropsTheByteOrderMarkAndBlankLines) {
  EXPECT_EQ(fields("\xEF\xBB\xBFimage_id,healthy\n\nTrain_0,1\n\r\n"), (Rows{{"image_id", "healthy"}, {"Train_0", "1"}}));
  EXPECT_EQ(lines("a\n\n\nb\n"), (std::vector<int64_t>{1, 4}));
}

TEST(Csv, MalformedQuotingNamesFileAndLine) {
  EXPECT_EQ(error_of([] { parse_csv("a,b\n1,\"open\n2,3\n", "m.csv"); }),
            "m.csv: line 2: a quoted field is never closed; close the quote or double the quotes inside it");
  EXPECT_EQ(error_of([] { parse_csv("a,b\n\"x\"y,2\n", "m.csv"); }),
            "m.csv: line 2: unexpected 'y' after a closing quote; quote the whole field and double the quotes inside it");
}

TEST(Csv, ReadCsvChecksTheHeader) {
  TempDir dir;
  testing::write_bytes(dir.file("ok.csv"), "\xEF\xBB\xBFimage_id,label\r\nx,1\r\n");
  const CsvTable t = read_csv(dir.file("ok.csv"));
  EXPECT_EQ(t.header, (std::vector<std::string>{"image_id", "label"}));
  ASSERT_EQ(t.rows.size(), 1u);
  EXPECT_EQ(t.rows[0].line, 2);
  EXPECT_EQ(t.column("label"), 1);
  EXPECT_EQ(t.column("nope"), -1);
  EXPECT_EQ(error_of([&] { t.require_column("nope", "the label"); }),
            dir.file("ok.csv") + ": no column 'nope' (the label); its columns are: image_id, label");

  testing::write_bytes(dir.file("empty.csv"), "\n\n");
  EXPECT_NE(error_of([&] { read_csv(dir.file("empty.csv")); }).find(dir.file("empty.csv") + ": empty CSV file"),
            std::string::npos);
  testing::write_bytes(dir.file("dup.csv"), "image_id,rust,rust\n");
  EXPECT_NE(error_of([&] { read_csv(dir.file("dup.csv")); }).find("column 'rust' twice"), std::string::npos);
  EXPECT_NE(error_of([&] { read_csv(dir.file("missing.csv")); }).find(dir.file("missing.csv")), std::string::npos);
}

}  // namespace convoy::records
