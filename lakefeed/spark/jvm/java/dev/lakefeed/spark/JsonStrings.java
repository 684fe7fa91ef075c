package dev.lakefeed.spark;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.List;

/**
 * Lists of strings crossing Py4J as one JSON array: a Python list passed to the JVM, or a Java
 * list read from Python, costs one round trip per element (and, iterated, a Java exception at
 * its end that pyspark converts with a dozen more).
 */
final class JsonStrings {
  private static final ObjectMapper MAPPER = new ObjectMapper();

  private JsonStrings() {}

  static String[] parse(String json) {
    try {
      return MAPPER.readValue(json, String[].class);
    } catch (JsonProcessingException e) {
      throw new IllegalArgumentException("not a JSON array of strings: " + json, e);
    }
  }

  static String write(List<String> strings) {
    try {
      return MAPPER.writeValueAsString(strings);
    } catch (JsonProcessingException e) {
      throw new IllegalStateException(e);
    }
  }
}
