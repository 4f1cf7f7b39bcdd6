package memcrab;

import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * A client-suite test run once per {@link Servers#targets()} entry: each server kind,
 * over text and over binary. The test takes (String kind, String protocol).
 */
@Target(ElementType.METHOD)
@Retention(RetentionPolicy.RUNTIME)
@ParameterizedTest(name = "{0} {1}")
@MethodSource("memcrab.Servers#targets")
@interface EachTarget {}
