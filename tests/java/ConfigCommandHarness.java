// Runs Kafka's kafka.admin.ConfigCommand (kafka-configs.sh) many times inside one JVM, so a
// differential test can compare hundreds of command lines without a JVM start (~1.5 s) each.
//
// Protocol (stdin -> stdout, one line per command, UTF-8):
//   in:  the arguments, each Base64-encoded, separated by TAB (an empty line = no arguments)
//   out: "<exit code> TAB <Base64 stdout> TAB <Base64 stderr>"
//
// ConfigCommand ends with org.apache.kafka.common.utils.Exit.exit(1) on errors; the exit
// procedure is replaced by one that records the first code and throws. ConfigCommand's own
// catch-all then prints a second "Error while executing..." with our exception, so the output
// is cut where the first exit happened: what a real process would have printed before dying.
// Compiled at test time (tests/test_configs_differential.py) against the cached Kafka jars.
import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Base64;

public final class ConfigCommandHarness {

    /** An OutputStream whose target is swapped per command. */
    static final class Switch extends OutputStream {
        volatile ByteArrayOutputStream target = new ByteArrayOutputStream();

        @Override public void write(int b) { target.write(b); }
        @Override public void write(byte[] b, int off, int len) { target.write(b, off, len); }
    }

    /** Thrown by the replaced exit procedure; never caught by us before main returns. */
    static final class ExitCalled extends RuntimeException {
        ExitCalled() { super("exit", null, false, false); }
    }

    static volatile int exitCode = -1;
    static volatile int outMark = -1;
    static volatile int errMark = -1;

    public static void main(String[] ignored) throws Exception {
        PrintStream real = new PrintStream(new FileOutputStream(FileDescriptor.out), true, "UTF-8");
        Switch out = new Switch();
        Switch err = new Switch();
        // Set before anything (log4j, scala.Console) captures the streams.
        System.setOut(new PrintStream(out, true, "UTF-8"));
        System.setErr(new PrintStream(err, true, "UTF-8"));
        org.apache.kafka.common.utils.Exit.setExitProcedure((code, message) -> {
            if (exitCode < 0) {
                exitCode = code;
                System.out.flush();
                System.err.flush();
                outMark = out.target.size();
                errMark = err.target.size();
            }
            throw new ExitCalled();
        });
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        Base64.Decoder dec = Base64.getDecoder();
        Base64.Encoder enc = Base64.getEncoder();
        String line;
        while ((line = in.readLine()) != null) {
            String[] parts = line.isEmpty() ? new String[0] : line.split("\t", -1);
            String[] args = new String[parts.length];
            for (int i = 0; i < parts.length; i++)
                args[i] = new String(dec.decode(parts[i]), StandardCharsets.UTF_8);
            out.target = new ByteArrayOutputStream();
            err.target = new ByteArrayOutputStream();
            exitCode = -1;
            outMark = -1;
            errMark = -1;
            try {
                kafka.admin.ConfigCommand.main(args);
            } catch (ExitCalled e) {
                // the command exited; its code is recorded
            } catch (Throwable t) {  // escaped main: a JVM would print it and exit 1
                t.printStackTrace(System.err);
                if (exitCode < 0) exitCode = 1;
            }
            System.out.flush();
            System.err.flush();
            byte[] o = out.target.toByteArray();
            byte[] e = err.target.toByteArray();
            if (outMark >= 0) o = java.util.Arrays.copyOf(o, outMark);
            if (errMark >= 0) e = java.util.Arrays.copyOf(e, errMark);
            int code = exitCode < 0 ? 0 : exitCode;
            real.println(code + "\t" + enc.encodeToString(o) + "\t" + enc.encodeToString(e));
            real.flush();
        }
    }
}
