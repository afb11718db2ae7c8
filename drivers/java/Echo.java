import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;

/**
 * The bare echo of `bench driver perf`: every line read on stdin written
 * back on stdout, read and written as CuratorDriver does (a BufferedReader
 * over System.in, one write of the whole line). Beside a driver's protocol
 * round trip it is the physical limit of the hop between the two runtimes.
 */
public final class Echo {
    public static void main(String[] args) throws IOException {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        OutputStream out = System.out;
        String line;
        while ((line = in.readLine()) != null) {
            byte[] b = (line + "\n").getBytes(StandardCharsets.UTF_8);
            out.write(b);
            out.flush();
        }
    }
}
