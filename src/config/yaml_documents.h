#pragma once
// How many YAML documents in a text hold something, counted from the text
// alone. yaml-cpp 0.7 is only safe on a config's first document: asked for
// the rest (YAML::LoadAll, or its parser's next document) it can loop
// forever or take tens of GiB on a few hundred hostile bytes (a fuzz find,
// docs/reliability.md), so the documents after the first are never parsed.
#include <string_view>

namespace convoy::train {

// Document markers ("---" or "..." at the start of a line, then a space, a
// tab or the line's end) split a YAML text into documents wherever they are:
// the YAML spec forbids them inside content, block scalars included. A
// document holds something when a line of it other than blank lines,
// comments and directives ('%') has text, the marker line's own rest
// included ("--- {a: 1}"). So "a: 1\n---\n" is one such document, and
// "a: 1\n---\nb: 2\n" two.
int yaml_documents_with_content(std::string_view text);

}  // namespace convoy::train
